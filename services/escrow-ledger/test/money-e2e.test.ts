import { randomBytes } from 'node:crypto';
import { createAgent } from '@paygate/agent-client';
import type { Bus } from '@paygate/bus';
import { usdcAbi } from '@paygate/chain';
import { lookupTransactionId } from '@paygate/checkout-widget/api';
import type { EventData } from '@paygate/contracts';
import { formatUsdc, formatUsdcExact, parseUsdc, splitFee } from '@paygate/money';
import {
  type AnvilInstance,
  createTestEnvironment,
  deployTestUsdc,
  eventOf,
  fundTestWallets,
  increaseTime,
  minedReceipt,
  openSchema,
  publishEvent,
  serveSellersForTests,
  startAnvil,
  TestClock,
  type TestEnvironment,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract, Wallet } from 'ethers';
import { type Kysely, sql } from 'kysely';
import { type MoneyServices, startMoneyServices } from './money-services';

/**
 * Money end to end on a real chain: anvil + TestUSDC, the real chain-indexer, checkout (the payment source),
 * escrow-ledger and settlement (which holds the escrow key and sends payouts and refunds), on real Postgres and
 * JetStream. One set of services for the file, one seller per scenario. Days pass by moving the services' injected
 * clock and anvil's clock together, never by sleeping. Every scenario ends with the ledger's escrow account equal
 * to the escrow wallet's on-chain USDC balance.
 */

const DAY_MS = 86_400_000;
const OPERATOR_TOKEN = 'money-e2e-operator-token-0123';
/** Written out here on purpose (not agent-client's builder): the ledger must verify exactly this text. */
const REFUND_REQUEST_TEXT = (
  transactionId: string,
  reason: string,
  s: { chainId: number; nonce: string; expiresAt: string },
) =>
  `Paygate refund request\ntransaction: ${transactionId}\nchain id: ${s.chainId}\nnonce: ${s.nonce}\nexpires at: ${s.expiresAt}\nreason: ${reason}`;

jest.setTimeout(60_000);

interface Seller {
  sellerId: string;
  apiKey: string;
  /** A fresh wallet: its USDC balance is exactly what settlement paid it. */
  payoutAddress: string;
}

interface Paid {
  transactionId: string;
  sessionId: string;
  amountMicro: bigint;
  sellerMicro: bigint;
  txHash: string;
}

describe('money end to end: checkout -> indexer -> ledger -> settlement on anvil', () => {
  let env: TestEnvironment;
  let anvil: AnvilInstance;
  let usdcAddress: string;
  let usdc: Contract;
  let bus: Bus;
  let services: MoneyServices;
  let ledger: MoneyServices['ledger'];
  let settlement: MoneyServices['settlement'];
  let checkout: MoneyServices['checkout'];
  let ledgerDb: Kysely<any>;
  let settlementDb: Kysely<any>;
  let sellerResponder: { stop(): Promise<void> } | undefined;
  const identities: Record<string, Parameters<typeof serveSellersForTests>[1][string]> = {};
  const clock = new TestClock();
  let revision = 0;

  const balanceOf = async (address: string) => BigInt(await usdc.getFunction('balanceOf')(address));

  /** A day passes for every service (injected clock) and for the chain (anvil's block time). */
  const nextDay = async () => {
    clock.advance(DAY_MS);
    await increaseTime(anvil.provider, DAY_MS / 1000);
  };

  const newSeller = async (minimumSettlement: string): Promise<Seller> => {
    const sellerId = `sel_${randomBytes(5).toString('hex')}`;
    const apiKey = `sk_test_${randomBytes(12).toString('hex')}`;
    const payoutAddress = Wallet.createRandom().address;
    const publishableKey = `pk_test_${randomBytes(12).toString('hex')}`;
    identities[apiKey] = {
      sellerId,
      walletAddress: payoutAddress,
      payoutAddress,
      publishableKey,
      apiKeyVersion: 1,
    };
    // The registry's key lookup answers for every seller made so far.
    await sellerResponder?.stop();
    sellerResponder = await serveSellersForTests(bus, { ...identities });
    revision += 1;
    const event = eventOf('seller.updated', {
      sellerId,
      revision,
      walletAddress: payoutAddress,
      payoutAddress,
      publishableKey,
      apiKeyVersion: 1,
      webhookUrl: null,
      webhookSecretVersion: 0,
      settlementFrequency: 'DAILY',
      minimumSettlement,
      updatedAt: clock.now().toISOString(),
    } satisfies EventData<'seller.updated'>);
    await publishEvent(bus, event);
    await waitFor(
      async () =>
        (await sql`select 1 from sellers where seller_id = ${sellerId}`.execute(settlementDb)).rows[0] &&
        (await sql`select 1 from sellers where seller_id = ${sellerId}`.execute(checkout.ctx.db)).rows[0],
      { message: 'seller projected by settlement and checkout', timeoutMs: 10_000 },
    );
    return { sellerId, apiKey, payoutAddress };
  };

  /** The seller's server opens a checkout session; the buyer sends exactly its amount to the session's address. */
  const payThroughCheckout = async (
    seller: Seller,
    amount: string,
    holdPeriodHours: number,
  ): Promise<Paid> => {
    const created = await fetch(`${checkout.url}/api/v1/checkout/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${seller.apiKey}` },
      body: JSON.stringify({ amount, description: `order of ${amount} USDC`, holdPeriodHours }),
    });
    const session = (await created.json()) as any;
    expect(created.status).toBe(201);
    const amountMicro = parseUsdc(session.exactAmount);
    const buyerUsdc = usdc.connect(testSigner('buyer', anvil.provider)) as Contract;
    const tx = await buyerUsdc.getFunction('transfer')(session.walletAddress, amountMicro);
    const receipt = await minedReceipt(tx);
    const txHash = receipt.hash.toLowerCase();
    // Settlement sweeps the session's address into escrow (its relayer pays the gas), from where it is paid out.
    await waitFor(async () => (await balanceOf(session.walletAddress)) === 0n, {
      message: 'session address swept into escrow',
      timeoutMs: 20_000,
    });
    const row = await waitFor(
      async () =>
        (
          await sql<any>`select id, source, session_id, escrow_status from transactions where tx_hash = ${txHash}`.execute(
            ledgerDb,
          )
        ).rows[0],
      { message: 'checkout payment booked by the ledger', timeoutMs: 15_000 },
    );
    expect(row).toMatchObject({ source: 'checkout', session_id: session.sessionId });
    if (holdPeriodHours > 0) expect(row.escrow_status).toBe('held');
    return {
      transactionId: row.id,
      sessionId: session.sessionId,
      amountMicro,
      sellerMicro: (amountMicro * 95n) / 100n,
      txHash,
    };
  };

  const escrowStatusOf = async (transactionId: string) =>
    (await sql<any>`select escrow_status from transactions where id = ${transactionId}`.execute(ledgerDb))
      .rows[0]?.escrow_status;

  const waitReleased = (paid: Paid) =>
    waitFor(async () => (await escrowStatusOf(paid.transactionId)) === 'available', {
      message: 'hold released',
      timeoutMs: 10_000,
    });

  const settlementsOf = async (sellerId: string) =>
    (
      await sql<any>`select * from settlements where seller_id = ${sellerId} order by created_at, settlement_id`.execute(
        settlementDb,
      )
    ).rows;

  /** Runs the settlement scheduler and waits for the seller's payout to be sent and booked by the ledger. */
  const settleAndWait = async (sellerId: string, expectedPayouts: number) => {
    await settlement.scheduler.runOnce();
    const done = await waitFor(
      async () => {
        const rows = (await settlementsOf(sellerId)).filter((s) => s.status === 'completed');
        return rows.length >= expectedPayouts ? rows : undefined;
      },
      { message: 'payout completed on chain', timeoutMs: 20_000 },
    );
    const last = done[done.length - 1];
    await waitFor(
      async () =>
        (
          await sql<any>`select status from payout_reservations where settlement_id = ${last.settlement_id}`.execute(
            ledgerDb,
          )
        ).rows[0]?.status === 'completed',
      { message: 'ledger booked settlement.completed', timeoutMs: 10_000 },
    );
    return last;
  };

  const call = async (path: string, init: { method?: string; key?: string; body?: unknown } = {}) => {
    const response = await fetch(`${ledger.url}${path}`, {
      method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
      headers: {
        ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(init.key ? { authorization: `Bearer ${init.key}` } : {}),
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    return { status: response.status, body: (await response.json()) as any };
  };

  const refund = (seller: Seller, paid: Paid, amount: string) =>
    call('/api/v1/refunds', {
      key: seller.apiKey,
      body: { transactionId: paid.transactionId, amount, reason: 'customer asked' },
    });

  const waitRefundCompleted = (refundId: string) =>
    waitFor(
      async () =>
        (await sql<any>`select status from refunds where id = ${refundId}`.execute(ledgerDb)).rows[0]
          ?.status === 'completed',
      { message: 'refund sent on chain and booked', timeoutMs: 20_000 },
    );

  /** Ledger escrow account vs the escrow wallet's on-chain USDC balance: zero difference. */
  const expectReconciled = async () => {
    // A payout or refund broadcast a moment ago has left the wallet before its confirmation reaches the
    // ledger, and the report may read the chain at a block before it: reconciliation converges once nothing is in
    // flight and the report has read the chain as it is now, so wait for that, then hold it to zero.
    const report = await waitFor(
      async () => {
        const r = await call('/api/v1/reconciliation', { key: OPERATOR_TOKEN });
        const current =
          r.status === 200 &&
          r.body.balanced &&
          parseUsdc(r.body.chainBalance) === (await balanceOf(testWallets.escrow.address));
        return current ? r : undefined;
      },
      { timeoutMs: 15_000, message: 'ledger and chain never agreed' },
    ).catch(() => call('/api/v1/reconciliation', { key: OPERATOR_TOKEN }));
    expect(report.status).toBe(200);
    expect(report.body).toMatchObject({ balanced: true, difference: '0', differences: [] });
    // No seller's debt is paid with other sellers' money in escrow.
    expect(report.body.exposure).toMatchObject({ uncovered: '0' });
    expect(parseUsdc(report.body.chainBalance)).toBe(await balanceOf(testWallets.escrow.address));
    expect(report.body.ledgerBalance).toBe(report.body.chainBalance);
  };

  beforeAll(async () => {
    env = await createTestEnvironment('moneye2e');
    anvil = await startAnvil();
    ({ address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl));
    usdc = new Contract(usdcAddress, usdcAbi, anvil.provider);
    await fundTestWallets({
      rpcUrl: anvil.rpcUrl,
      usdcAddress,
      amountMicro: parseUsdc('1000'),
      roles: ['buyer', 'platform'],
    });
    bus = await env.bus();
    services = await startMoneyServices({
      env,
      rpcUrl: anvil.rpcUrl,
      usdcAddress,
      operatorToken: OPERATOR_TOKEN,
      clock: clock.now,
      ledgerEnv: { RELEASE_INTERVAL_MS: '100' },
    });
    ({ ledger, checkout, settlement } = services);
    ledgerDb = openSchema(env.schemaFor('escrow-ledger'));
    settlementDb = openSchema(env.schemaFor('settlement'));
    // The platform's float: a refund after settlement is paid from money that is not the seller's any more.
    // It arrives as an ordinary transfer, so the indexer reports it and the ledger books it (into suspense).
    const platformUsdc = usdc.connect(testSigner('platform', anvil.provider)) as Contract;
    const float = await platformUsdc.getFunction('transfer')(testWallets.escrow.address, parseUsdc('50'));
    await minedReceipt(float);
    await waitFor(
      async () =>
        (await sql<any>`select count(*)::int as n from transfers`.execute(ledgerDb)).rows[0].n === 1,
      { message: 'platform float booked', timeoutMs: 10_000 },
    );
  });

  afterAll(async () => {
    await sellerResponder?.stop();
    await services?.stop();
    await ledgerDb?.destroy();
    await settlementDb?.destroy();
    await anvil?.stop();
    await env?.cleanup();
  });

  test('payment -> hold -> release -> settlement: the seller receives exactly 95% on chain', async () => {
    const seller = await newSeller('1');
    const paid = await payThroughCheckout(seller, '12.5', 24);
    expect(paid.sellerMicro).toBe(splitFee(paid.amountMicro).sellerMicro);
    // Still held before the hold period passes.
    await settlement.scheduler.runOnce();
    expect(await escrowStatusOf(paid.transactionId)).toBe('held');
    expect(await balanceOf(seller.payoutAddress)).toBe(0n);

    await nextDay();
    await waitReleased(paid);
    const payout = await settleAndWait(seller.sellerId, 1);
    expect(payout.amount_micro).toBe(paid.sellerMicro);
    expect(await balanceOf(seller.payoutAddress)).toBe(paid.sellerMicro);
    expect(await escrowStatusOf(paid.transactionId)).toBe('settled');
    const balances = await call('/api/v1/balances', { key: seller.apiKey });
    expect(balances.body).toMatchObject({
      held: '0',
      available: '0',
      settled: formatUsdc(paid.sellerMicro),
    });
    await expectReconciled();
  });

  test('below the minimum the balance accumulates across days, then is paid out at once', async () => {
    const seller = await newSeller('10');
    const first = await payThroughCheckout(seller, '8', 0);
    await waitReleased(first);
    await nextDay();
    await settlement.scheduler.runOnce();
    // The ledger decides the due settlement from its inbox (settlement.due -> payout.refused): wait for its answer.
    const skipped = await waitFor(
      async () => (await settlementsOf(seller.sellerId)).find((s) => s.status !== 'pending'),
      { message: 'the ledger decided the due settlement', timeoutMs: 20_000 },
    );
    expect(skipped).toMatchObject({ status: 'skipped', skip_reason: 'below_minimum' });
    expect(await balanceOf(seller.payoutAddress)).toBe(0n);
    await expectReconciled();

    const second = await payThroughCheckout(seller, '4', 0);
    await waitReleased(second);
    await nextDay();
    const payout = await settleAndWait(seller.sellerId, 1);
    expect(payout.amount_micro).toBe(first.sellerMicro + second.sellerMicro);
    expect(await balanceOf(seller.payoutAddress)).toBe(first.sellerMicro + second.sellerMicro);
    await expectReconciled();
  });

  test('a full refund in escrow goes back to the buyer; the seller gets nothing', async () => {
    const seller = await newSeller('1');
    const paid = await payThroughCheckout(seller, '10', 24);
    const buyerBefore = await balanceOf(testWallets.buyer.address);
    const booked = await refund(seller, paid, formatUsdcExact(paid.amountMicro));
    expect(booked.status).toBe(201);
    expect(booked.body).toMatchObject({ phase: 'in_escrow', remainingRefundable: '0' });
    await waitRefundCompleted(booked.body.refundId);
    expect(await balanceOf(testWallets.buyer.address)).toBe(buyerBefore + paid.amountMicro);

    await nextDay();
    await settlement.scheduler.runOnce();
    expect((await settlementsOf(seller.sellerId)).filter((s) => s.status === 'completed')).toHaveLength(0);
    expect(await balanceOf(seller.payoutAddress)).toBe(0n);
    await expectReconciled();
  });

  test('a refund after settlement is paid only from what the seller still has (refused with nothing held); the next settlement recovers it', async () => {
    const seller = await newSeller('1');
    const first = await payThroughCheckout(seller, '10', 0);
    await waitReleased(first);
    await nextDay();
    await settleAndWait(seller.sellerId, 1);
    expect(await balanceOf(seller.payoutAddress)).toBe(first.sellerMicro);

    // Nothing left with Paygate: the refund would be paid with other sellers' money in escrow.
    const refused = await refund(seller, first, '4');
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({
      code: 'insufficient_seller_balance',
      available: '0',
      held: '0',
      shortfall: '3.8',
    });

    // With a held sale the seller has money with Paygate again: the refund is paid from it, the seller owes.
    const second = await payThroughCheckout(seller, '10', 24);
    const buyerBefore = await balanceOf(testWallets.buyer.address);
    const booked = await refund(seller, first, '4');
    expect(booked.status).toBe(201);
    expect(booked.body).toMatchObject({
      phase: 'after_release',
      sellerAmount: '3.8',
      platformFeeReturned: '0.2',
    });
    await waitRefundCompleted(booked.body.refundId);
    expect(await balanceOf(testWallets.buyer.address)).toBe(buyerBefore + 4_000_000n);
    expect((await call('/api/v1/balances', { key: seller.apiKey })).body).toMatchObject({
      held: formatUsdc(second.sellerMicro),
      available: '0',
      owed: '3.8',
    });
    await expectReconciled();

    await nextDay();
    await waitReleased(second);
    const payout = await settleAndWait(seller.sellerId, 2);
    expect(payout.amount_micro).toBe(second.sellerMicro - 3_800_000n);
    expect(await balanceOf(seller.payoutAddress)).toBe(first.sellerMicro + second.sellerMicro - 3_800_000n);
    expect((await call('/api/v1/balances', { key: seller.apiKey })).body).toMatchObject({
      available: '0',
      owed: '0',
    });
    await expectReconciled();
  });

  test('partial refunds cannot exceed the original together, nor can two concurrent ones', async () => {
    const seller = await newSeller('1');
    const paid = await payThroughCheckout(seller, '10', 24);
    const buyerBefore = await balanceOf(testWallets.buyer.address);
    const firstPart = await refund(seller, paid, '6');
    expect(firstPart.status).toBe(201);
    const tooMuch = await refund(seller, paid, '5');
    expect(tooMuch.status).toBe(409);
    expect(tooMuch.body.error).toMatchObject({ code: 'amount_exceeds_refundable', field: 'amount' });
    const rest = await refund(seller, paid, formatUsdcExact(paid.amountMicro - 6_000_000n));
    expect(rest.status).toBe(201);
    expect(rest.body.remainingRefundable).toBe('0');
    expect((await refund(seller, paid, '0.000001')).status).toBe(409);

    // Two refunds of 6 racing on another payment of 10: exactly one is booked.
    const raced = await payThroughCheckout(seller, '10', 24);
    const buyerAfterRacedPayment = buyerBefore - raced.amountMicro;
    const results = await Promise.all([refund(seller, raced, '6'), refund(seller, raced, '6')]);
    expect(results.map((r) => r.status).sort()).toEqual([201, 409]);

    const refundIds = [firstPart, rest, ...results.filter((r) => r.status === 201)].map(
      (r) => r.body.refundId,
    );
    for (const id of refundIds) await waitRefundCompleted(id);
    expect(await balanceOf(testWallets.buyer.address)).toBe(
      buyerAfterRacedPayment + paid.amountMicro + 6_000_000n,
    );
    const rows = (
      await sql<any>`select amount_micro, refunded_micro from transactions where id in (${paid.transactionId}, ${raced.transactionId})`.execute(
        ledgerDb,
      )
    ).rows;
    for (const row of rows) expect(row.refunded_micro <= row.amount_micro).toBe(true);
    await expectReconciled();
  });

  test('buyer refund requests: one approved and refunded, one rejected, one signed by a stranger refused', async () => {
    const seller = await newSeller('1');
    const approved = await payThroughCheckout(seller, '3', 24);
    const rejected = await payThroughCheckout(seller, '2', 24);
    const buyer = new Wallet(testWallets.buyer.privateKey);
    const stranger = new Wallet(testWallets.stranger.privateKey);
    const request = async (wallet: Wallet, paid: Paid, reason: string) => {
      const signing = {
        chainId: 31337,
        nonce: randomBytes(16).toString('hex'),
        expiresAt: new Date(clock.nowMs() + 3_600_000).toISOString(),
      };
      return call('/api/v1/refund-requests', {
        body: {
          transactionId: paid.transactionId,
          reason,
          ...signing,
          signature: await wallet.signMessage(REFUND_REQUEST_TEXT(paid.transactionId, reason, signing)),
        },
      });
    };

    const forged = await request(stranger, approved, 'never arrived');
    expect(forged.status).toBe(403);
    expect(forged.body.error).toMatchObject({ code: 'not_payer', field: 'signature' });

    const first = await request(buyer, approved, 'never arrived');
    expect(first.status).toBe(201);
    const second = await request(buyer, rejected, 'changed my mind');
    expect(second.status).toBe(201);

    const buyerBefore = await balanceOf(testWallets.buyer.address);
    const approval = await call(`/api/v1/refund-requests/${first.body.refundRequestId}/approve`, {
      key: seller.apiKey,
      body: {},
    });
    expect(approval.status).toBe(200);
    expect(approval.body.status).toBe('approved');
    const rejection = await call(`/api/v1/refund-requests/${second.body.refundRequestId}/reject`, {
      key: seller.apiKey,
      body: { reason: 'delivered' },
    });
    expect(rejection.status).toBe(200);
    expect(rejection.body.status).toBe('rejected');

    await waitRefundCompleted(approval.body.refund.refundId);
    expect(await balanceOf(testWallets.buyer.address)).toBe(buyerBefore + approved.amountMicro);
    expect(
      (
        await sql<any>`select count(*)::int as n from refunds where transaction_id = ${rejected.transactionId}`.execute(
          ledgerDb,
        )
      ).rows[0].n,
    ).toBe(0);

    // The rejected payment is settled to the seller as usual.
    await nextDay();
    await waitReleased(rejected);
    await settleAndWait(seller.sellerId, 1);
    expect(await balanceOf(seller.payoutAddress)).toBe(rejected.sellerMicro);
    await expectReconciled();
  });

  test('a buyer asks for refunds by tx hash and by checkout session with the agent client, and follows them', async () => {
    const seller = await newSeller('1');
    const byTx = await payThroughCheckout(seller, '3', 24);
    const bySession = await payThroughCheckout(seller, '2', 24);
    const buyer = createAgent({
      wallet: testSigner('buyer', anvil.provider),
      maxPricePerCall: '1',
      paygateUrl: ledger.url,
      now: clock.now,
    });
    const stranger = createAgent({
      wallet: testSigner('stranger', anvil.provider),
      maxPricePerCall: '1',
      paygateUrl: ledger.url,
      now: clock.now,
    });

    // What a buyer knows: the transfer's hash, or the session it paid (the widget's PaymentResult has both).
    const first = await buyer.requestRefund({ txHash: byTx.txHash, reason: 'never arrived' });
    expect(first).toMatchObject({
      id: expect.stringMatching(/^rrq_/),
      status: 'pending',
      transactionId: byTx.transactionId,
      refund: null,
    });
    const second = await buyer.requestRefund({ sessionId: bySession.sessionId, reason: 'changed my mind' });
    expect(second).toMatchObject({ status: 'pending', transactionId: bySession.transactionId });
    // Only the payer's signature counts; a log index that is not the payment's names nothing.
    await expect(stranger.requestRefund({ txHash: bySession.txHash, reason: 'mine' })).rejects.toMatchObject({
      status: 403,
      code: 'not_payer',
      field: 'signature',
    });
    await expect(
      buyer.requestRefund({ txHash: bySession.txHash, logIndex: 7, reason: 'x' }),
    ).rejects.toMatchObject({ status: 404, code: 'transaction_not_found' });
    const neither = await call('/api/v1/refund-requests', {
      body: { reason: 'x', signature: `0x${'11'.repeat(65)}` },
    });
    expect(neither.body.error).toMatchObject({
      field: 'transactionId',
      message: 'transactionId must be given, or txHash or sessionId instead (exactly one of the three)',
    });
    // The widget's lookup: a paid session to its ledger transaction.
    const lookup = await call(`/api/v1/transactions/lookup?sessionId=${bySession.sessionId}`);
    expect(lookup.body).toMatchObject({
      transactionId: bySession.transactionId,
      refundableAmount: formatUsdc(bySession.amountMicro),
    });
    // What the checkout widget puts in PaymentResult.transactionId (the same lookup, from the widget's code).
    expect(await lookupTransactionId(ledger.url, bySession.sessionId)).toBe(bySession.transactionId);
    expect(await lookupTransactionId(ledger.url, 'cs_unknown')).toBeNull();

    // The public status route (no key) follows the request: approved, then completed with the refund's hash.
    expect(await buyer.refundRequestStatus(first.id)).toMatchObject({ status: 'pending', refund: null });
    const buyerBefore = await balanceOf(testWallets.buyer.address);
    const approval = await call(`/api/v1/refund-requests/${first.id}/approve`, {
      key: seller.apiKey,
      body: {},
    });
    expect(approval.status).toBe(200);
    await waitRefundCompleted(approval.body.refund.refundId);
    const done = await waitFor(
      async () => {
        const status = await buyer.refundRequestStatus(first.id);
        return status.status === 'completed' ? status : undefined;
      },
      { message: 'refund request completed', timeoutMs: 10_000 },
    );
    const sent = (
      await sql<any>`select refund_tx_hash from refunds where id = ${approval.body.refund.refundId}`.execute(
        ledgerDb,
      )
    ).rows[0];
    expect(done).toMatchObject({
      transactionId: byTx.transactionId,
      refund: {
        status: 'completed',
        amount: formatUsdc(byTx.amountMicro),
        refundTxHash: sent.refund_tx_hash,
      },
    });
    expect(await balanceOf(testWallets.buyer.address)).toBe(buyerBefore + byTx.amountMicro);
    // Another seller's key does not see it; without a key anyone holding the id does.
    const other = await newSeller('1');
    expect((await call(`/api/v1/refund-requests/${first.id}`, { key: other.apiKey })).status).toBe(404);
    await expectReconciled();
  });
});
