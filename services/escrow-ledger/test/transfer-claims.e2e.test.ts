import { randomBytes } from 'node:crypto';
import type { EventData } from '@paygate/contracts';
import {
  loadConfig as loadGatewayConfig,
  type RunningGateway,
  startGatewayProxy,
} from '@paygate/gateway-proxy';
import {
  type Harness,
  skillSnapshot,
  startHarness,
  startUpstream,
} from '@paygate/gateway-proxy/test/harness';
import { parseUsdc } from '@paygate/money';
import {
  countStreamMessages,
  eventOf,
  mine,
  openSchema,
  publishEvent,
  serveSellersForTests,
  testWallets,
  waitFor,
  waitForConsumerIdle,
} from '@paygate/testing';
import { Wallet } from 'ethers';
import { type Kysely, sql } from 'kysely';
import { type MoneyServices, startMoneyServices } from './money-services';

/**
 * One on-chain transfer buys exactly one thing whatever payment path claims it (402 proof,
 * POST /api/verify, checkout session), and a transfer any path claimed is never shown as unmatched money.
 * Real anvil + TestUSDC, two gateway-proxy replicas, chain-indexer, checkout, escrow-ledger and settlement on
 * real Postgres and JetStream. The gateway accepts a proof at 1 confirmation while the indexer reports a
 * transfer at 3, so a test decides which payment path sees the transfer first by mining.
 */

const OPERATOR_TOKEN = 'transfer-claims-operator-token-0123456';
const SELLER_ID = 'seller-1'; // the gateway harness's skills belong to it
const API_KEY = `sk_test_${randomBytes(12).toString('hex')}`;
const INDEXER_CONFIRMATIONS = 3;

jest.setTimeout(90_000);

describe('one transfer, one purchase across 402 proofs, /api/verify and checkout sessions', () => {
  let h: Harness;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let services: MoneyServices;
  let replica: RunningGateway;
  let checkoutDb: Kysely<any>;
  let ledgerDb: Kysely<any>;
  let sellerResponder: { stop(): Promise<void> } | undefined;

  const resource = () => h.resource('GET', 'claims', '/data');

  /** A paid call of the skill through one gateway replica. */
  const present = async (gatewayUrl: string, txHash: string, amountMicro: bigint, to?: string) => {
    const header = await h.header({
      txHash,
      resource: resource(),
      amount: amountMicro,
      ...(to ? { to } : {}),
    });
    const res = await fetch(`${gatewayUrl}/api/v1/skills/claims/data`, {
      headers: { 'X-402-Payment': header },
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  /** The seller middleware's verification of the same proof. */
  const verify = async (gatewayUrl: string, txHash: string, amountMicro: bigint, to?: string) => {
    const header = await h.header({
      txHash,
      resource: resource(),
      amount: amountMicro,
      ...(to ? { to } : {}),
    });
    const res = await fetch(`${gatewayUrl}/api/verify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ payment: header, price: '0.05', type: 'payPerCall', resource: resource() }),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const operator = async (path: string, body?: unknown) => {
    const res = await fetch(`${services.checkout.url}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: {
        authorization: `Bearer ${OPERATOR_TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const createSession = async () => {
    const res = await fetch(`${services.checkout.url}/api/v1/checkout/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ amount: '0.05', description: 'order' }),
    });
    expect(res.status).toBe(201);
    const session = (await res.json()) as any;
    return {
      id: session.sessionId as string,
      amountMicro: parseUsdc(session.exactAmount),
      address: session.walletAddress as string,
    };
  };
  const sessionStatus = async (sessionId: string) =>
    ((await (await fetch(`${services.checkout.url}/api/v1/checkout/sessions/${sessionId}`)).json()) as any)
      .status as string;
  /** The buyer pays the agent escrow (what an agent does), or the address it names (a session's own). */
  const pay = async (amountMicro: bigint, to?: string) =>
    (await h.transfer('buyer', amountMicro, to ? { to } : {})).toLowerCase();
  /** Enough blocks for the indexer to report the transfer. */
  const letIndexerSee = () => mine(h.anvil.provider, INDEXER_CONFIRMATIONS);
  const checkoutTransfer = async (txHash: string) =>
    (
      await sql<any>`select transfer_id, status, unmatched_reason, candidate_session_id, session_id, refund_request_id
        from transfers where tx_hash = ${txHash}`.execute(checkoutDb)
    ).rows[0];
  /**
   * Checkout handled the transfer to the agent escrow and recorded nothing: money there is never a session's, so
   * it is not on checkout's list at all (the ledger books it; an x402 proof or /api/verify claims it).
   */
  const expectIgnoredByCheckout = async (txHash: string) => {
    await waitFor(
      async () =>
        (await sql`select 1 from transfers where tx_hash = ${txHash}`.execute(ledgerDb)).rows.length > 0,
      { message: `transfer ${txHash} observed by the ledger`, timeoutMs: 15_000 },
    );
    await waitForConsumerIdle(h.bus, 'checkout-transfers');
    expect(await checkoutTransfer(txHash)).toBeUndefined();
  };
  const unmatchedList = async () =>
    ((await operator('/api/v1/operator/transfers?status=unmatched&limit=500')).body.transfers as any[]).map(
      (t) => t.txHash as string,
    );
  const ledgerTransactions = async (txHash: string) =>
    (await sql<any>`select id, source from transactions where tx_hash = ${txHash}`.execute(ledgerDb)).rows;
  const ledgerConflicts = async (txHash: string) =>
    (await sql<any>`select kind from payment_conflicts where tx_hash = ${txHash}`.execute(ledgerDb)).rows;
  const waitForBooking = (txHash: string) =>
    waitFor(async () => (await ledgerTransactions(txHash)).length > 0, {
      message: `payment of ${txHash} booked by the ledger`,
      timeoutMs: 15_000,
    });
  /** Every producer relayed what it wrote and the ledger handled it all (the transfers the indexer reported). */
  const settled = async () => {
    const relays = [h.gateway, replica, services.checkout, services.ledger].filter(Boolean);
    await waitFor(
      async () => (await Promise.all(relays.map((s) => s.ctx.relay.backlog()))).every((n) => n === 0),
      {
        message: 'every outbox relayed',
      },
    );
    await waitForConsumerIdle(h.bus, 'ledger-transfer-observed');
  };
  /** The ledger booked the payment (with its claim, answered before the call) and the rest has been handled. */
  const settle = async (txHash: string) => {
    await waitForBooking(txHash);
    await settled();
  };

  beforeAll(async () => {
    h = await startHarness(
      'claims',
      { CONFIRMATIONS: '1', RATE_LIMIT_PER_MINUTE: '1000' },
      {
        claims: 'ledger',
      },
    );
    upstream = await startUpstream();
    services = await startMoneyServices({
      env: h.env,
      rpcUrl: h.anvil.rpcUrl,
      usdcAddress: h.usdcAddress,
      operatorToken: OPERATOR_TOKEN,
      clock: h.clock.now,
      indexerEnv: { CONFIRMATIONS: String(INDEXER_CONFIRMATIONS) },
    });
    replica = await startGatewayProxy(
      loadGatewayConfig(h.env.envFor('gateway-proxy', h.gatewayEnv), h.clock.now),
    );
    checkoutDb = openSchema(h.env.schemaFor('checkout'));
    ledgerDb = openSchema(h.env.schemaFor('escrow-ledger'));
    const payoutAddress = Wallet.createRandom().address;
    const publishableKey = `pk_test_${randomBytes(12).toString('hex')}`;
    sellerResponder = await serveSellersForTests(h.bus, {
      [API_KEY]: {
        sellerId: SELLER_ID,
        walletAddress: payoutAddress,
        payoutAddress,
        publishableKey,
        apiKeyVersion: 1,
      },
    });
    const seller = eventOf('seller.updated', {
      sellerId: SELLER_ID,
      revision: 1,
      walletAddress: payoutAddress,
      payoutAddress,
      publishableKey,
      apiKeyVersion: 1,
      webhookUrl: null,
      webhookSecretVersion: 0,
      settlementFrequency: 'DAILY',
      minimumSettlement: '1',
      updatedAt: new Date().toISOString(),
    } satisfies EventData<'seller.updated'>);
    await publishEvent(h.bus, seller);
    await h.publishSkill(skillSnapshot({ name: 'claims', apiBaseUrl: `${upstream.url}/seller` }));
    await waitFor(
      async () =>
        (await sql`select 1 from sellers where seller_id = ${SELLER_ID}`.execute(checkoutDb)).rows[0],
      { message: 'seller projected by checkout', timeoutMs: 10_000 },
    );
    await waitFor(async () => replica.state.skills.byName('claims'), {
      message: 'skill seen by the replica',
    });
  });

  afterAll(async () => {
    await sellerResponder?.stop();
    await replica?.stop().catch(() => undefined);
    await upstream?.close();
    await services?.stop().catch(() => undefined);
    await checkoutDb?.destroy();
    await ledgerDb?.destroy();
    await h?.stop();
  });

  test('point 1: a transfer that paid a checkout session (at the checkout wallet) is refused as a 402 proof and by /api/verify', async () => {
    const session = await createSession();
    const txHash = await pay(session.amountMicro, session.address);
    await letIndexerSee();
    await waitFor(async () => (await sessionStatus(session.id)) === 'paid', {
      message: 'session paid by its transfer',
      timeoutMs: 15_000,
    });
    const reached = upstream.requests.length;

    // Not a payment to the escrow: it paid the session it was sent for, and nothing else.
    const proof = await present(h.gateway.url, txHash, session.amountMicro, session.address);
    expect({ status: proof.status, reason: proof.body.reason }).toEqual({
      status: 402,
      reason: 'wrong_recipient',
    });
    expect(upstream.requests.length).toBe(reached);
    const verified = await verify(replica.url, txHash, session.amountMicro, session.address);
    expect(verified.body).toMatchObject({ valid: false, reason: 'wrong_recipient' });

    await settle(txHash);
    expect(await ledgerTransactions(txHash)).toEqual([expect.objectContaining({ source: 'checkout' })]);
    expect(await ledgerConflicts(txHash)).toEqual([]);
  });

  test("point 1: an agent's transfer of a session's exact amount to the escrow, spent on a call, leaves the session open and is not checkout's", async () => {
    const session = await createSession();
    const txHash = await pay(session.amountMicro);
    const reached = upstream.requests.length;
    const proof = await present(h.gateway.url, txHash, session.amountMicro);
    expect(proof.status).toBe(200);
    expect(upstream.requests.length).toBe(reached + 1);

    await letIndexerSee();
    // Never a candidate for the session: a transfer to the escrow is not checkout's.
    await expectIgnoredByCheckout(txHash);
    expect(await sessionStatus(session.id)).toBe('open');
    expect(await unmatchedList()).not.toContain(txHash);
    await settle(txHash);
    expect(await ledgerTransactions(txHash)).toEqual([expect.objectContaining({ source: 'x402' })]);
    expect(await ledgerConflicts(txHash)).toEqual([]);
  });

  test("point 1, race: a transfer of a session's amount to the escrow, observed while its proof is presented to two replicas and /api/verify: exactly one wins, never the session", async () => {
    for (const delayMs of [0, 150, 400]) {
      const session = await createSession();
      const txHash = await pay(session.amountMicro);
      const reached = upstream.requests.length;
      const later = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
      const [, ...answers] = await Promise.all([
        letIndexerSee(),
        later(delayMs).then(() => present(h.gateway.url, txHash, session.amountMicro)),
        later(delayMs).then(() => present(replica.url, txHash, session.amountMicro)),
        later(delayMs).then(() => verify(replica.url, txHash, session.amountMicro)),
        later(delayMs).then(() => verify(h.gateway.url, txHash, session.amountMicro)),
      ]);
      await expectIgnoredByCheckout(txHash);
      await settle(txHash);
      const served = answers.filter((a) => a.status === 200 && a.body.valid !== false).length;
      expect(await sessionStatus(session.id)).toBe('open');
      expect({ delayMs, winners: served }).toEqual({ delayMs, winners: 1 });
      expect(upstream.requests.length - reached).toBeLessThanOrEqual(1);
      expect(await ledgerTransactions(txHash)).toHaveLength(1);
      expect(await ledgerConflicts(txHash)).toEqual([]);
      const losers = answers.filter((x) => x.status !== 200 || x.body.valid === false);
      // Logged whole: a loser's status and body say which refusal it was.
      process.stdout.write(`race delay ${delayMs}: losers ${JSON.stringify(losers)}\n`);
      for (const a of losers) {
        expect({ delayMs, status: a.status, reason: a.body.reason ?? a.body.error?.code }).toEqual({
          delayMs,
          status: a.status,
          reason: 'payment_already_used',
        });
      }
    }
  });

  test('point 1, two gateway replicas: concurrent presentations of one proof serve exactly one call', async () => {
    const amountMicro = parseUsdc('0.05');
    const txHash = await pay(amountMicro);
    const reached = upstream.requests.length;
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => present(i % 2 ? replica.url : h.gateway.url, txHash, amountMicro)),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([200, ...Array(9).fill(402)]);
    expect(upstream.requests.length - reached).toBe(1);
    await settle(txHash);
    expect(await ledgerTransactions(txHash)).toHaveLength(1);
  });

  test("point 2: a paid 402 call is never on checkout's unmatched list, whether checkout sees it before or after the claim", async () => {
    const amountMicro = parseUsdc('0.05');
    // The proof first, then checkout sees the transfer.
    const first = await pay(amountMicro);
    expect((await present(h.gateway.url, first, amountMicro)).status).toBe(200);
    await letIndexerSee();
    await expectIgnoredByCheckout(first);

    // Checkout sees the transfer first (nothing claims it yet), then it pays a call.
    const second = await pay(amountMicro);
    await letIndexerSee();
    await expectIgnoredByCheckout(second);
    expect((await present(h.gateway.url, second, amountMicro)).status).toBe(200);
    await settle(second);
    const unmatched = await unmatchedList();
    expect(unmatched).not.toContain(first);
    expect(unmatched).not.toContain(second);
    expect(await checkoutTransfer(second)).toBeUndefined();
  });

  test('point 2: an operator refund (or attach) of a transfer a 402 call claimed is refused by the ledger with a reason, and the row is not stuck', async () => {
    const amountMicro = parseUsdc('0.05');
    const txHash = await pay(amountMicro);
    await letIndexerSee();
    await expectIgnoredByCheckout(txHash);
    // An operator's row for it (checkout ignores the agent escrow's transfers; one recorded by hand, or from before)
    // must not let the operator spend it: the ledger decides.
    const transferId = `tr_${randomBytes(12).toString('hex')}`;
    await sql`insert into transfers (transfer_id, chain_id, network, tx_hash, log_index, block_number, block_hash,
        from_address, to_address, token_address, amount_micro, status, unmatched_reason, observed_at, updated_at)
      values (${transferId}, 31337, 'local', ${txHash}, 0, 1, ${`0x${'0'.repeat(64)}`}, ${testWallets.buyer.address},
        ${testWallets.escrow.address}, ${h.usdcAddress}, ${amountMicro}, 'unmatched', 'paid_to_agent_escrow', now(), now())`.execute(
      checkoutDb,
    );
    const row = { transfer_id: transferId };
    expect((await present(h.gateway.url, txHash, amountMicro)).status).toBe(200);
    await waitForBooking(txHash);
    // Nothing tells checkout of the gateway's claim but the ledger's refusal: an operator's row that says
    // unmatched, as if it paid no session, must still not let the operator spend it.
    expect(await checkoutTransfer(txHash)).toMatchObject({ status: 'unmatched' });
    await sql`update transfers set unmatched_reason = 'no_session_with_this_amount'
      where transfer_id = ${row.transfer_id}`.execute(checkoutDb);

    const refund = await operator(`/api/v1/operator/transfers/${row.transfer_id}/refund`, {
      note: 'mistake?',
    });
    expect({ status: refund.status, code: refund.body.error?.code }).toEqual({
      status: 409,
      code: 'transfer_claimed_by_payment',
    });
    expect(refund.body.error.message).toMatch(/x402/);
    expect(await checkoutTransfer(txHash)).toMatchObject({ status: 'claimed', refund_request_id: null });
    expect(await unmatchedList()).not.toContain(txHash);
    // A refund request would have gone out through checkout's outbox to the ledger: both are done by now.
    await settled();
    await waitForConsumerIdle(h.bus, 'ledger-transfer-refund-requested');
    const requested = (await countStreamMessages(h.bus, 'transfer.refund_requested')).filter(
      (e) => (e.data as any).txHash === txHash,
    );
    expect(requested).toHaveLength(0);
    expect((await sql<any>`select id from refunds where tx_hash = ${txHash}`.execute(ledgerDb)).rows).toEqual(
      [],
    );

    // Attaching it to a session by hand is refused the same way: the session is not paid with spent money.
    const session = await createSession();
    await sql`update transfers set status = 'unmatched' where transfer_id = ${row.transfer_id}`.execute(
      checkoutDb,
    );
    const attach = await operator(`/api/v1/operator/transfers/${row.transfer_id}/attach`, {
      sessionId: session.id,
    });
    expect({
      status: attach.status,
      code: attach.body.error?.code,
      claimedBy: attach.body.error?.claimedBy,
    }).toEqual({
      status: 409,
      code: 'transfer_claimed_by_payment',
      claimedBy: 'x402',
    });
    expect(await sessionStatus(session.id)).toBe('open');
    expect(await checkoutTransfer(txHash)).toMatchObject({ status: 'claimed', session_id: null });
  });

  test('a gateway that cannot reach the ledger answers 503 and serves nothing', async () => {
    const amountMicro = parseUsdc('0.05');
    const txHash = await pay(amountMicro);
    await services.ledger.stop();
    const reached = upstream.requests.length;
    const proof = await present(h.gateway.url, txHash, amountMicro);
    expect(proof.status).toBe(503);
    expect(upstream.requests.length).toBe(reached);
    const verified = await verify(replica.url, txHash, amountMicro);
    expect(verified.status).toBe(503);
    expect(
      (await sql<any>`select id from payment_claims where tx_hash = ${txHash}`.execute(h.db)).rows,
    ).toEqual([]);
  });
});
