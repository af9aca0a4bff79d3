import { createHash } from 'node:crypto';
import { formatAddress } from '@paygate/chain';
import { increaseTime, TestClock, testWallets, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import { sql } from 'kysely';
import pg from 'pg';
import { periodAt, settlementIdFor } from '../src/schedule/periods';
import { payIntoEscrow, useSettlementHarness } from './harness';
import { publishEvent, sellerUpdated } from './helpers';

const DAY_MS = 86_400_000;
const OPERATOR_TOKEN = 'race-operator-token-0123456789';

/**
 * A seller's payout address changes (wallet-signed, effective after PAYOUT_ADDRESS_DELAY_MS: the registry then
 * publishes seller.updated) around a payout of the period, on the real ledger and anvil. The ledger decides the
 * payout with the address of its own view of the seller, and its payout.reserved names it; settlement sends exactly
 * there. Each payout goes to exactly one address, once: the address in effect when the ledger reserved it, which the
 * seller had approved then; never to both, and never to an address only announced.
 */
describe('a payout address change racing a payout in flight', () => {
  const h = useSettlementHarness('stlpayoutrace', {
    escrowFunds: null,
    buyerFunds: '100',
    clock: new TestClock('2026-12-01T10:00:00Z'),
    overrides: { OPERATOR_TOKEN },
    escrowLedger: { OPERATOR_TOKEN, RELEASE_INTERVAL_MS: '200' },
  });

  const nextDay = async () => {
    h.clock.advance(DAY_MS);
    await increaseTime(h.chain.anvil.provider, DAY_MS / 1000);
  };

  /** The buyer pays escrow on chain for the seller (the indexer and the gateway say so); returns when released. */
  const pay = (sellerId: string, amount: string) => payIntoEscrow(h, { amount, sellerId, released: true });

  /** The registry's seller.updated, as when a signed change became effective; settlement's view of it. */
  const payoutAddressIs = async (sellerId: string, payoutAddress: string) => {
    await publishEvent(
      h.bus,
      sellerUpdated(sellerId, { payoutAddress, settlementFrequency: 'DAILY', minimumSettlement: '10' }),
    );
    await waitFor(
      async () =>
        (
          await h.db
            .selectFrom('sellers')
            .select('payout_address')
            .where('seller_id', '=', sellerId)
            .executeTakeFirst()
        )?.payout_address === payoutAddress,
      { message: `settlement sees ${payoutAddress}` },
    );
    await waitFor(
      async () =>
        (
          await sql<any>`select payout_address from seller_payout_addresses where seller_id = ${sellerId}`.execute(
            h.ledgerDb,
          )
        ).rows[0]?.payout_address === payoutAddress.toLowerCase(),
      { message: `the ledger sees ${payoutAddress}` },
    );
  };
  const completed = (settlementId: string) =>
    waitFor(
      async () => {
        const row = await h.db
          .selectFrom('settlements')
          .selectAll()
          .where('settlement_id', '=', settlementId)
          .executeTakeFirst();
        return row?.status === 'completed' ? row : undefined;
      },
      { timeoutMs: 20_000, message: `${settlementId} completed` },
    );
  /** The seller's reservations once the ledger booked the last one as paid (settlement.completed). */
  const reservationsOf = (sellerId: string) =>
    waitFor(
      async () => {
        const rows = (
          await sql<any>`select settlement_id, status, payout_address, amount_micro from payout_reservations
            where seller_id = ${sellerId} order by settlement_id`.execute(h.ledgerDb)
        ).rows;
        return rows.every((r) => r.status !== 'reserved') ? rows : undefined;
      },
      { message: 'the ledger booked the payout' },
    );
  const balanced = () =>
    waitFor(
      async () => {
        const report = (await fetch(`${h.escrowLedger.url}/api/v1/reconciliation`, {
          headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
        }).then((r) => r.json())) as any;
        return report.balanced === true;
      },
      { message: 'ledger and chain reconciled' },
    );

  it('the address moves before the payout is due: the ledger reserves for the new address, paid once there only', async () => {
    const sellerId = 'sel_moved_before';
    const oldAddress = Wallet.createRandom().address;
    const newAddress = Wallet.createRandom().address;
    await payoutAddressIs(sellerId, oldAddress);
    await pay(sellerId, '12');
    // The seller's signed change takes effect before the period is due.
    await payoutAddressIs(sellerId, newAddress);
    await nextDay();
    const settlementId = settlementIdFor(sellerId, periodAt('DAILY', h.clock.now()));
    const payoutsBefore = (await h.chain.transfersFromEscrow()).length;
    await h.service.scheduler.runOnce();
    const paid = await completed(settlementId);

    expect((await h.chain.transfersFromEscrow()).slice(payoutsBefore)).toEqual([
      { to: formatAddress(newAddress), amountMicro: 11_400_000n, txHash: paid.tx_hash },
    ]);
    expect(await h.chain.balanceOf(oldAddress)).toBe(0n);
    expect(await reservationsOf(sellerId)).toEqual([
      {
        settlement_id: settlementId,
        status: 'completed',
        payout_address: newAddress.toLowerCase(),
        amount_micro: 11_400_000n,
      },
    ]);
    await balanced();
  });

  it('a recorded payout waiting to be signed when the address moves: sent once to the address it was recorded for', async () => {
    const sellerId = 'sel_in_flight';
    const oldAddress = Wallet.createRandom().address;
    const newAddress = Wallet.createRandom().address;
    await payoutAddressIs(sellerId, oldAddress);
    await pay(sellerId, '15');
    await nextDay();
    const settlementId = settlementIdFor(sellerId, periodAt('DAILY', h.clock.now()));
    const payoutsBefore = (await h.chain.transfersFromEscrow()).length;

    // The escrow signer is busy (the test holds its lock, as a replica signing a long batch would): the payout is
    // reserved for the old address and recorded, then waits to be signed.
    const settlementSchema = h.env.schemaFor('settlement');
    const digest = createHash('sha256')
      .update(
        `settlement-sender:${settlementSchema}:${h.chain.anvil.chainId}:${testWallets.escrow.address.toLowerCase()}`,
      )
      .digest();
    const lockKey = BigInt.asIntN(64, BigInt(`0x${digest.subarray(0, 8).toString('hex')}`)).toString();
    const signer = new pg.Client({ connectionString: h.env.envFor('settlement').DATABASE_URL });
    await signer.connect();
    try {
      await signer.query('select pg_advisory_lock($1::bigint)', [lockKey]);
      await h.service.scheduler.runOnce();
      // Only this lock in this database: pg_locks is the whole server's, where other suites wait on advisory
      // locks of their own (migrations), which would let the address move before the ledger reserved the payout.
      await waitFor(
        async () =>
          (
            await signer.query<{ n: number }>(
              `select count(*)::int n from pg_locks
                where locktype = 'advisory' and not granted and objsubid = 1
                  and database = (select oid from pg_database where datname = current_database())
                  and ((classid::bigint << 32) | objid::bigint) = $1::bigint`,
              [lockKey],
            )
          ).rows[0]!.n > 0,
        { message: 'the payout waits for the signer' },
      );
      expect(
        (
          await h.db
            .selectFrom('settlements')
            .selectAll()
            .where('settlement_id', '=', settlementId)
            .executeTakeFirst()
        )?.payout_address,
      ).toBe(oldAddress);
      // The seller's signed change takes effect while the payout waits; the next pass asks nothing more.
      await payoutAddressIs(sellerId, newAddress);
      await h.service.scheduler.runOnce();
    } finally {
      await signer.query('select pg_advisory_unlock($1::bigint)', [lockKey]).catch(() => undefined);
      await signer.end();
    }
    const paid = await completed(settlementId);
    expect((await h.chain.transfersFromEscrow()).slice(payoutsBefore)).toEqual([
      { to: formatAddress(oldAddress), amountMicro: 14_250_000n, txHash: paid.tx_hash },
    ]);
    expect(await h.chain.balanceOf(newAddress)).toBe(0n);
    expect(await reservationsOf(sellerId)).toEqual([
      {
        settlement_id: settlementId,
        status: 'completed',
        payout_address: oldAddress.toLowerCase(),
        amount_micro: 14_250_000n,
      },
    ]);

    // The next period's payout goes to the new address, once.
    await pay(sellerId, '11');
    await nextDay();
    const nextId = settlementIdFor(sellerId, periodAt('DAILY', h.clock.now()));
    await h.service.scheduler.runOnce();
    const next = await completed(nextId);
    expect((await h.chain.transfersFromEscrow()).slice(payoutsBefore)).toEqual([
      { to: formatAddress(oldAddress), amountMicro: 14_250_000n, txHash: paid.tx_hash },
      { to: formatAddress(newAddress), amountMicro: 10_450_000n, txHash: next.tx_hash },
    ]);
    await balanced();
  });
});
