import { testWallets, waitFor, waitForConsumerIdle } from '@paygate/testing';
import { HDNodeWallet } from 'ethers';
import { sql } from 'kysely';
import request from 'supertest';
import { loadConfig } from '../src';
import { DEV_DEPOSIT_XPUB } from '../src/config';
import { depositAddressAt, depositNode } from '../src/sessions/deposit-addresses';
import { type CheckoutHarness, ESCROW, startHarness, transferEvent } from './helpers';

const DEPOSIT = testWallets.checkoutEscrow.address;

/**
 * A seller that chose deposit addresses (checkoutMatching: deposit_address): each session is paid to its own
 * address, and only a transfer to that address pays it. A transfer of exactly a session's amount to the agent
 * escrow (an agent paying a skill of that price) is not checkout's at all (end to end on anvil in
 * capture.e2e.test.ts), and one of that amount to the checkout wallet pays no deposit-address session (its
 * amount is not a unique amount).
 */
describe('checkout deposit addresses', () => {
  let h: CheckoutHarness;
  beforeAll(async () => {
    h = await startHarness('codeposit', {}, { matching: 'deposit_address' });
  });
  afterAll(() => h.stop());

  const newSession = async () => {
    const res = await request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', `Bearer ${h.secretKey}`)
      .send({ amount: '4.2', description: 'order' });
    expect(res.status).toBe(201);
    return res.body;
  };
  const session = async (id: string) => (await request(h.url).get(`/api/v1/checkout/sessions/${id}`)).body;
  const transferRow = (txHash: string) =>
    waitFor(
      async () =>
        (
          await sql<any>`select status, unmatched_reason, session_id from transfers
            where tx_hash = ${txHash.toLowerCase()}`.execute(h.service.ctx.db)
        ).rows[0],
      { message: `transfer ${txHash} handled` },
    );

  it("tells the buyer to pay the session's own address, neither the agent escrow nor the shared wallet", async () => {
    const [a, b] = [await newSession(), await newSession()];
    for (const s of [a, b]) {
      expect(s.walletAddress).not.toBe(DEPOSIT);
      expect(s.walletAddress).not.toBe(ESCROW);
      expect(s.exactAmount).toBe('4.200000');
    }
    expect(a.walletAddress).not.toBe(b.walletAddress);
  });

  it("never pays a session with a transfer to another address, even of exactly the session's amount", async () => {
    const s = await newSession();
    const toEscrow = transferEvent(s.exactAmount, { to: ESCROW });
    await h.publish('transfer.observed', toEscrow);
    const toSharedWallet = transferEvent(s.exactAmount, { to: DEPOSIT });
    await h.publish('transfer.observed', toSharedWallet);
    expect(await transferRow(toSharedWallet.txHash)).toEqual({
      status: 'unmatched',
      unmatched_reason: 'no_session_with_this_amount',
      session_id: null,
    });
    await waitForConsumerIdle(h.bus, 'checkout-transfers');
    expect((await session(s.sessionId)).status).toBe('open');
    // The agent escrow's transfer was ignored: not even listed.
    expect(
      (
        await sql`select 1 from transfers where tx_hash = ${toEscrow.txHash.toLowerCase()}`.execute(
          h.service.ctx.db,
        )
      ).rows,
    ).toEqual([]);

    // Anything else is not Paygate's money at all.
    const elsewhere = transferEvent(s.exactAmount, { to: testWallets.stranger.address });
    await h.publish('transfer.observed', elsewhere);
    expect((await transferRow(elsewhere.txHash)).unmatched_reason).toBe('wrong_recipient');

    // The same amount to the session's address pays it.
    const toSession = transferEvent(s.exactAmount, { to: s.walletAddress });
    await h.publish('transfer.observed', toSession);
    expect(await transferRow(toSession.txHash)).toMatchObject({ status: 'matched', session_id: s.sessionId });
    await waitFor(async () => (await session(s.sessionId)).status === 'paid', { message: 'session paid' });
  });

  it('writes the session, its idempotency record and both events (session, deposit address) together', async () => {
    const post = (key: string) =>
      request(h.url)
        .post('/api/v1/checkout/sessions')
        .set('Authorization', `Bearer ${h.secretKey}`)
        .set('Idempotency-Key', key)
        .send({ amount: '6', description: 'order with an address' });
    const first = await post('order-1');
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ matching: 'deposit_address', exactAmount: '6.000000' });
    const outbox = await sql<{ subject: string; envelope: { data: Record<string, unknown> } }>`
      select subject, envelope from outbox where envelope->'data'->>'sessionId' = ${first.body.sessionId}
      order by subject`.execute(h.service.ctx.db);
    expect(outbox.rows.map((r) => r.subject)).toEqual([
      'checkout.session_created',
      'deposit.address_assigned',
    ]);
    expect(outbox.rows[0]!.envelope.data).toEqual(first.body);
    const row = await h.service.ctx.db
      .selectFrom('sessions')
      .select(['derivation_index', 'late_until', 'deposit_address', 'amount_reserved'])
      .where('session_id', '=', first.body.sessionId)
      .executeTakeFirstOrThrow();
    expect(row.amount_reserved).toBe(false);
    expect(row.deposit_address).toBe(
      depositAddressAt(depositNode(DEV_DEPOSIT_XPUB), Number(row.derivation_index)),
    );
    expect(outbox.rows[1]!.envelope.data).toEqual({
      sessionId: first.body.sessionId,
      address: first.body.walletAddress,
      derivationIndex: Number(row.derivation_index),
      chainId: 31337,
      assignedAt: first.body.createdAt,
      // The indexer watches a grace period (7 days by default) past the late window.
      watchUntil: new Date(row.late_until.getTime() + 7 * 86_400_000).toISOString(),
    });
    const again = await post('order-1');
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
  });

  it('gives every concurrent session of one price its own deposit address, at exactly the price', async () => {
    const count = 40;
    const results = await Promise.all(
      Array.from({ length: count }, () =>
        request(h.url)
          .post('/api/v1/checkout/sessions')
          .set('Authorization', `Bearer ${h.secretKey}`)
          .send({ amount: '7', description: 'same price' }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(count).fill(201));
    expect(new Set(results.map((r) => r.body.exactAmount))).toEqual(new Set(['7.000000']));
    expect(new Set(results.map((r) => r.body.walletAddress)).size).toBe(count);
    // The database itself refuses a second session at an address, whatever process tries.
    const taken = results[0]!.body;
    await expect(
      sql`insert into sessions (session_id, seller_id, description, price_micro, exact_amount_micro, status,
            hold_period_hours, created_at, expires_at, late_until, updated_at, deposit_address, derivation_index)
          values ('cs_dup', 'x', 'dup', 7000000, 7000000, 'open', 0, now(),
            now() + interval '1 minute', now() + interval '2 minutes', now(), ${taken.walletAddress.toLowerCase()},
            ${2 ** 31 - 1})`.execute(h.service.ctx.db),
    ).rejects.toThrow(/sessions_deposit_address/);
  });

  it('switches when the seller changes its setting (seller.updated): the next session is by amount', async () => {
    await h.publish('seller.updated', {
      sellerId: h.sellerId,
      revision: 2,
      walletAddress: testWallets.seller.address,
      payoutAddress: testWallets.seller.address,
      publishableKey: h.publishableKey,
      apiKeyVersion: 1,
      webhookUrl: null,
      webhookSecretVersion: 0,
      settlementFrequency: 'DAILY',
      minimumSettlement: '10',
      checkoutMatching: 'amount',
      updatedAt: new Date().toISOString(),
    });
    await waitFor(
      async () =>
        (
          await h.service.ctx.db
            .selectFrom('sellers')
            .select('checkout_matching')
            .where('seller_id', '=', h.sellerId)
            .executeTakeFirstOrThrow()
        ).checkout_matching === 'amount',
      { message: 'setting projected' },
    );
    // The projection cache drops the seller on this replica's commit; another replica's within 2 s.
    const s = await newSession();
    expect(s).toMatchObject({ matching: 'amount', walletAddress: DEPOSIT });
    expect(s.exactAmount).toMatch(/^4\.20\d{4}$/);
  });

  it('refuses a missing or public-test deposit xpub and a missing or shared checkout wallet in production', () => {
    const production = {
      NODE_ENV: 'production',
      ESCROW_ADDRESS: ESCROW,
      OPERATOR_TOKEN: 'a-production-operator-token-0123',
      USDC_ADDRESS: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
    };
    const xpub = HDNodeWallet.createRandom().neuter().extendedKey;
    expect(() => loadConfig(production)).toThrow(/CHECKOUT_DEPOSIT_XPUB: must be set in production/);
    expect(() => loadConfig({ ...production, CHECKOUT_DEPOSIT_XPUB: xpub })).toThrow(
      /CHECKOUT_ESCROW_ADDRESS: must be set in production/,
    );
    expect(() => loadConfig({ ...production, CHECKOUT_DEPOSIT_XPUB: DEV_DEPOSIT_XPUB })).toThrow(
      /CHECKOUT_DEPOSIT_XPUB: is derived from the public test mnemonic/,
    );
    expect(() =>
      loadConfig({ ...production, CHECKOUT_DEPOSIT_XPUB: xpub, CHECKOUT_ESCROW_ADDRESS: ESCROW }),
    ).toThrow(/CHECKOUT_ESCROW_ADDRESS: must differ from ESCROW_ADDRESS/);
    expect(
      loadConfig({ ...production, CHECKOUT_DEPOSIT_XPUB: xpub, CHECKOUT_ESCROW_ADDRESS: DEPOSIT })
        .depositXpub,
    ).toBe(xpub);
  });
});
