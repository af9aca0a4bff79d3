import { type Bus, requestRpc } from '@paygate/bus';
import type { RpcRequest } from '@paygate/contracts';
import { openSchema, waitFor } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import { ServiceError } from 'nats';
import { type RunningEscrowLedger, startEscrowLedger } from '../src';
import { type LedgerHarness, observedData, paymentData, randomTxHash, startLedgerHarness } from './helpers';

/**
 * `ledger.claim_transfer` on real Postgres and NATS, with two ledger replicas answering in one queue group:
 * the first claim of a transfer wins whatever the payment path and the replica, a repeat of the same path and
 * reference is ok again, and an operator refund is checked against the books.
 */

let h: LedgerHarness;
let replica: RunningEscrowLedger;
let db: Kysely<any>;
let bus: Bus;
const PAYER = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';

beforeAll(async () => {
  h = await startLedgerHarness('ledgerclaims');
  bus = h.bus;
  // A second replica on the same schema and bus namespace: both answer in the `escrow-ledger` queue group.
  replica = await startEscrowLedger(h.ledger.deps.config);
  db = openSchema(h.env.schemaFor('escrow-ledger'));
});
afterAll(async () => {
  await replica?.stop();
  await db?.destroy();
  await h?.stop();
});

const claim = (request: Partial<RpcRequest<'ledger.claim_transfer'>> & { txHash: string }) =>
  requestRpc(
    bus,
    'ledger.claim_transfer',
    {
      chainId: 31337,
      logIndex: 0,
      // x402 unless the request names its payment path.
      claimedVia: 'x402' as const,
      reference: `local:${request.txHash}`,
      payer: PAYER,
      amount: '1.5',
      ...request,
    },
    { timeoutMs: 5000 },
  );

describe('ledger.claim_transfer', () => {
  test('concurrent claims from every payment path on two replicas: exactly one path holds the transfer', async () => {
    for (let round = 0; round < 3; round++) {
      const txHash = randomTxHash();
      const requests = Array.from({ length: 24 }, (_, i) => {
        const claimedVia = (['x402', 'verify', 'checkout', 'operator_refund'] as const)[i % 4]!;
        const reference =
          claimedVia === 'checkout'
            ? 'cs_session'
            : claimedVia === 'operator_refund'
              ? 'tr_1'
              : `local:${txHash}`;
        return claim({ txHash, claimedVia, reference });
      });
      const replies = await Promise.all(requests);
      const winners = replies.filter((r) => r.ok);
      expect(winners).toHaveLength(6); // every request of the winning path (same reference): ok
      expect(winners.filter((r) => r.ok && r.fresh)).toHaveLength(1);
      expect(new Set(winners.map((r) => r.ok && r.claimId)).size).toBe(1);
      const losers = replies.filter((r) => !r.ok);
      expect(losers).toHaveLength(18);
      for (const loser of losers) expect(loser).toMatchObject({ ok: false, reason: 'claimed_elsewhere' });
      const rows = (
        await sql<any>`select claimed_via from transfer_claims where tx_hash = ${txHash}`.execute(db)
      ).rows;
      expect(rows).toHaveLength(1);
      const claimedBy = (losers[0] as { claimedBy: { claimedVia: string } }).claimedBy;
      expect(rows[0].claimed_via).toBe(claimedBy.claimedVia);
    }
  });

  test('both replicas answered claims (one queue group; the unique row decided, not the replica)', async () => {
    for (const ledger of [h.ledger, replica]) {
      const metrics = await (await fetch(`${ledger.url}/metrics`)).text();
      const answered = metrics
        .split('\n')
        .filter((line) => line.startsWith('ledger_transfer_claims_total{'))
        .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
      expect(answered).toBeGreaterThan(0);
    }
  });

  test('the same payment path and reference again is ok (not fresh); another reference of the same path is refused', async () => {
    const txHash = randomTxHash();
    const first = await claim({ txHash, claimedVia: 'checkout', reference: 'cs_a' });
    expect(first).toMatchObject({ ok: true, fresh: true });
    expect(await claim({ txHash, claimedVia: 'checkout', reference: 'cs_a' })).toMatchObject({
      ok: true,
      fresh: false,
      claimId: (first as { claimId: string }).claimId,
    });
    const other = await claim({ txHash, claimedVia: 'checkout', reference: 'cs_b' });
    expect(other).toMatchObject({
      ok: false,
      reason: 'claimed_elsewhere',
      claimedBy: { claimedVia: 'checkout' },
    });
    expect((other as { message: string }).message).toMatch(/a checkout session/);
  });

  test('an operator refund is checked against the books; a transfer not booked yet can be claimed', async () => {
    const payment = paymentData(h.sellerId, { amount: '2', payer: PAYER });
    const observed = observedData(payment);
    await h.publish('transfer.observed', observed);
    await waitFor(
      async () => (await sql`select 1 from transfers where tx_hash = ${observed.txHash}`.execute(db)).rows[0],
      { message: 'transfer booked' },
    );
    const wrongAmount = await claim({
      txHash: observed.txHash,
      claimedVia: 'operator_refund',
      reference: 'tr_x',
      payer: observed.from,
      amount: '3',
    });
    expect(wrongAmount).toMatchObject({ ok: false, reason: 'amount_differs', booked: { amount: '2' } });
    expect(
      await claim({
        txHash: observed.txHash,
        claimedVia: 'operator_refund',
        reference: 'tr_x',
        payer: observed.from,
        amount: '2',
      }),
    ).toMatchObject({ ok: true, fresh: true });
    // Not booked yet (its transfer.observed still on the way): claimed now, checked by the refund handler later.
    expect(
      await claim({ txHash: randomTxHash(), claimedVia: 'operator_refund', reference: 'tr_y' }),
    ).toMatchObject({
      ok: true,
    });
  });

  test('claims that arrive together are written together, each answered on its own: a repeat and a rival of one transfer among them', async () => {
    const hashes = Array.from({ length: 10 }, () => randomTxHash());
    const [first, second] = hashes as [string, string];
    const replies = await Promise.all([
      ...hashes.map((txHash) => claim({ txHash })),
      // The same claim again (a gateway's retry): ok, the one claim.
      claim({ txHash: first }),
      // Another path on a transfer of the same burst: one of the two holds it.
      claim({ txHash: second, claimedVia: 'checkout', reference: 'cs_rival' }),
    ]);
    const byHash = new Map<string, Array<(typeof replies)[number]>>();
    for (const [i, reply] of replies.entries()) {
      const txHash = i < 10 ? hashes[i]! : i === 10 ? first : second;
      byHash.set(txHash, [...(byHash.get(txHash) ?? []), reply]);
    }
    for (const txHash of hashes.slice(2)) {
      expect(byHash.get(txHash)).toEqual([
        expect.objectContaining({ ok: true, fresh: true, claimId: expect.stringMatching(/^clm_/) }),
      ]);
    }
    // The repeat: both ok, exactly one fresh, one claim id.
    const repeated = byHash.get(first)!;
    expect(repeated.every((r) => r.ok)).toBe(true);
    expect(repeated.filter((r) => r.ok && r.fresh)).toHaveLength(1);
    expect(new Set(repeated.map((r) => r.ok && r.claimId)).size).toBe(1);
    // The rival: one holds it, the other is refused naming the holder.
    const rivals = byHash.get(second)!;
    expect(rivals.filter((r) => r.ok && r.fresh)).toHaveLength(1);
    expect(rivals.filter((r) => !r.ok)).toEqual([expect.objectContaining({ reason: 'claimed_elsewhere' })]);
    // Each answer is its own claim: ten claim ids for ten transfers, each row its own request's.
    const rows = (
      await sql<any>`select tx_hash, claim_id, claimed_via, xmin::text as tx
        from transfer_claims where tx_hash in (${sql.join(hashes)})`.execute(db)
    ).rows;
    expect(rows).toHaveLength(10);
    for (const row of rows) {
      const answered = byHash.get(row.tx_hash)!.find((r) => r.ok && r.fresh);
      expect(answered).toMatchObject({ claimId: row.claim_id });
    }
    // Written together: a few transactions (per replica, the first request may go alone; a busy host spreads the
    // requests over more ticks), not one per claim.
    expect(new Set(rows.map((row) => row.tx)).size).toBeLessThan(rows.length);
  });

  test('a claim that fails does not fail the claims written with it', async () => {
    const hashes = Array.from({ length: 8 }, () => randomTxHash());
    const broken = randomTxHash();
    const settled = await Promise.allSettled([
      ...hashes.map((txHash) => claim({ txHash })),
      // Valid on the wire, refused by the table (amount_micro > 0): its statement fails.
      claim({ txHash: broken, amount: '0' }),
    ]);
    for (const outcome of settled.slice(0, 8)) {
      expect(outcome).toMatchObject({ status: 'fulfilled', value: { ok: true, fresh: true } });
    }
    expect(settled[8]).toMatchObject({ status: 'rejected', reason: { code: 500 } });
    const rows = (
      await sql<any>`select tx_hash from transfer_claims where tx_hash in (${sql.join([...hashes, broken])})`.execute(
        db,
      )
    ).rows;
    expect(rows.map((row) => row.tx_hash).sort()).toEqual([...hashes].sort());
    // The same transfer claimed properly afterwards: nothing of the failed claim stands in its way.
    expect(await claim({ txHash: broken })).toMatchObject({ ok: true, fresh: true });
  });

  test('an invalid request is refused naming the field', async () => {
    const bad = await bus.nc.request(
      bus.rpcSubject('ledger.claim_transfer'),
      new TextEncoder().encode(JSON.stringify({ chainId: 31337, txHash: 'nope' })),
      { timeout: 5000 },
    );
    // A NATS service error (the service API's convention), not a reply: code 400 naming the field.
    expect(ServiceError.toServiceError(bad)).toMatchObject({
      code: 400,
      message: expect.stringMatching(/txHash/),
    });
  });
});
