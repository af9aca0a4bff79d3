import { execFile } from 'node:child_process';
import path from 'node:path';
import { formatAddress } from '@paygate/chain';
import { parseUsdc } from '@paygate/money';
import {
  fundTestWallets,
  increaseTime,
  serveSellersForTests,
  TestClock,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { sql } from 'kysely';
import { periodAt, settlementIdFor } from '../src/schedule/periods';
import { payIntoEscrow, useSettlementHarness } from './harness';
import { publishEvent, sellerUpdated } from './helpers';

const DAY_MS = 86_400_000;
const OPERATOR_TOKEN = 'e2e-operator-token-0123456789';
const SELLER_KEY = 'sk_test_e2e_ledger_seller_01';
const sellerId = 'sel_e2e';
/** A fresh seller that pays its own skill and tries to refund itself after its payout. */
const ATTACKER_KEY = 'sk_test_e2e_ledger_attacker_1';
const attackerId = 'sel_attacker';
const TREASURY = testWallets.platform.address;

/**
 * Settlement with the real escrow-ledger: real on-chain payments into escrow, holds released by the ledger,
 * payouts reserved by the ledger's RPC and sent on anvil, a seller refund sent back to the buyer, and the
 * ledger reconciling with the chain at the end.
 */
describe('settlement + escrow-ledger end to end', () => {
  // escrow holds only what buyers pay into it
  const h = useSettlementHarness('stle2e', {
    escrowFunds: null,
    buyerFunds: '100',
    clock: new TestClock('2026-12-01T10:00:00Z'),
    overrides: { OPERATOR_TOKEN, TREASURY_ADDRESS: TREASURY },
    escrowLedger: { OPERATOR_TOKEN, RELEASE_INTERVAL_MS: '200' },
  });

  const nextDay = async () => {
    h.clock.advance(DAY_MS);
    await increaseTime(h.chain.anvil.provider, DAY_MS / 1000);
  };

  /** The buyer pays the escrow wallet on chain; the indexer and the gateway say so. */
  const pay = (
    amount: string,
    holdPeriodHours: number,
    by: { sellerId: string; payer: 'buyer' | 'stranger' } = { sellerId, payer: 'buyer' },
  ) => payIntoEscrow(h, { amount, holdPeriodHours, ...by });

  const escrowStatusOf = async (transactionId: string) =>
    (await sql<any>`select escrow_status from transactions where id = ${transactionId}`.execute(h.ledgerDb))
      .rows[0]?.escrow_status;

  beforeAll(async () => {
    await fundTestWallets({
      rpcUrl: h.chain.anvil.rpcUrl,
      usdcAddress: h.chain.usdcAddress,
      amountMicro: parseUsdc('100'),
      roles: ['stranger'],
    });
    const sellers = await serveSellersForTests(h.bus, {
      [SELLER_KEY]: {
        sellerId,
        walletAddress: testWallets.seller.address,
        payoutAddress: testWallets.seller.address,
        publishableKey: 'pk_test_e2e_ledger_seller',
        apiKeyVersion: 1,
      },
      [ATTACKER_KEY]: {
        sellerId: attackerId,
        walletAddress: testWallets.stranger.address,
        payoutAddress: testWallets.stranger.address,
        publishableKey: 'pk_test_e2e_ledger_attacker',
        apiKeyVersion: 1,
      },
    });
    h.onStop(() => sellers.stop());
  });

  it('accumulates below the minimum, pays out the 95% share, refunds on h.chain, and reconciles', async () => {
    await publishEvent(
      h.bus,
      sellerUpdated(sellerId, { settlementFrequency: 'DAILY', minimumSettlement: '10' }),
    );
    await waitFor(() =>
      h.db.selectFrom('sellers').selectAll().where('seller_id', '=', sellerId).executeTakeFirst(),
    );

    // Day 1: $8 paid, $7.60 available to the seller: below the minimum, skipped.
    const first = await pay('8', 0);
    await waitFor(async () => (await escrowStatusOf(first.id)) === 'available', { message: 'hold released' });
    await nextDay();
    await h.service.scheduler.runOnce();
    // The ledger decides the due settlement in its own transaction and answers by event.
    const skipped = await waitFor(
      async () =>
        (await h.db.selectFrom('settlements').selectAll().where('status', '<>', 'pending').execute())[0],
      { message: 'the ledger decided the settlement' },
    );
    expect(skipped).toMatchObject({
      status: 'skipped',
      skip_reason: 'below_minimum',
      available_micro: 7_600_000n,
    });

    // Day 2: another $4 ($3.80 to the seller): $11.40 available, paid out on chain.
    const second = await pay('4', 0);
    await waitFor(async () => (await escrowStatusOf(second.id)) === 'available', {
      message: 'hold released',
    });
    const sellerBefore = await h.chain.balanceOf(testWallets.seller.address);
    await nextDay();
    await h.service.scheduler.runOnce();
    const paid = await waitFor(
      async () =>
        (await h.db.selectFrom('settlements').selectAll().where('status', '=', 'completed').execute())[0],
      { timeoutMs: 20_000, message: 'payout completed' },
    );
    expect(paid.amount_micro).toBe(11_400_000n);
    expect(await h.chain.balanceOf(testWallets.seller.address)).toBe(sellerBefore + 11_400_000n);
    // The ledger consumed settlement.completed: the reservation is completed, the money settled.
    await waitFor(
      async () =>
        (
          await sql<any>`select status from payout_reservations where settlement_id = ${paid.settlement_id}`.execute(
            h.ledgerDb,
          )
        ).rows[0]?.status === 'completed',
      { message: 'ledger booked the payout' },
    );

    // A held payment refunded by the seller: the ledger books it, settlement sends it back to the buyer.
    const third = await pay('10', 24);
    const buyerBefore = await h.chain.balanceOf(testWallets.buyer.address);
    const refund = await fetch(`${h.escrowLedger.url}/api/v1/refunds`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${SELLER_KEY}` },
      body: JSON.stringify({ transactionId: third.id, amount: '10', reason: 'customer asked' }),
    });
    expect(refund.status).toBe(201);
    await waitFor(
      async () => (await h.db.selectFrom('refunds').selectAll().executeTakeFirst())?.status === 'completed',
      {
        timeoutMs: 20_000,
        message: 'refund sent',
      },
    );
    expect(await h.chain.balanceOf(testWallets.buyer.address)).toBe(buyerBefore + 10_000_000n);
    await waitFor(
      async () =>
        (await sql<any>`select status from refunds where transaction_id = ${third.id}`.execute(h.ledgerDb))
          .rows[0]?.status === 'completed',
      { message: 'ledger completed the refund' },
    );

    // The books match the chain: 22 paid in, 11.40 paid out, 10 refunded; the platform's 5% fees (0.60) remain.
    const report = await fetch(`${h.escrowLedger.url}/api/v1/reconciliation`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
    }).then((r) => r.json() as Promise<any>);
    expect(report).toMatchObject({
      balanced: true,
      chainBalance: '0.6',
      ledgerBalance: '0.6',
      differences: [],
    });
    expect(await h.chain.balanceOf(testWallets.escrow.address)).toBe(600_000n);
  });

  /** POST /api/v1/operator/settlements/run as an operator. */
  const settleNow = async (body: Record<string, unknown>) => {
    const response = await fetch(`${h.service.url}/api/v1/operator/settlements/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${OPERATOR_TOKEN}` },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as any };
  };

  it('settles now on an operator request: payment -> hold release -> payout of 95% on chain -> reconciled', async () => {
    await nextDay(); // a period without a payout yet
    const payoutsBefore = (await h.chain.transfersFromEscrow()).length;
    const sellerBefore = await h.chain.balanceOf(testWallets.seller.address);

    // Held money is not available: settle-now skips the seller and says why.
    const payment = await pay('20', 1);
    expect(await escrowStatusOf(payment.id)).toBe('held');
    const early = await settleNow({ sellerId });
    expect(early.status).toBe(200);
    expect(early.body).toMatchObject({
      settled: [],
      skipped: [{ sellerId, reason: 'nothing_available', status: 'skipped', txHash: null }],
    });
    const { settlementId } = early.body.skipped[0];

    // The hold passes; the same period's skipped settlement is asked again. Two operators at once (one
    // seller, all sellers): one payout, 95% of the payment, with its hash on chain.
    h.clock.advanceHours(1);
    await increaseTime(h.chain.anvil.provider, 3600);
    await waitFor(async () => (await escrowStatusOf(payment.id)) === 'available', {
      message: 'hold released',
    });
    const [one, all] = await Promise.all([
      settleNow({ sellerId, waitMs: 20_000 }),
      settleNow({ all: true, waitMs: 20_000 }),
    ]);
    expect([one.status, all.status]).toEqual([200, 200]);
    const settled = [...one.body.settled, ...all.body.settled];
    expect(settled).toHaveLength(1);
    expect(settled[0]).toMatchObject({ settlementId, sellerId, status: 'completed', amount: '19' });
    expect([...one.body.skipped, ...all.body.skipped]).toEqual([
      expect.objectContaining({ settlementId, reason: 'already_settled_this_period' }),
    ]);
    const payouts = (await h.chain.transfersFromEscrow()).slice(payoutsBefore);
    expect(payouts).toEqual([
      { to: formatAddress(testWallets.seller.address), amountMicro: 19_000_000n, txHash: settled[0].txHash },
    ]);
    expect(await h.chain.balanceOf(testWallets.seller.address)).toBe(sellerBefore + 19_000_000n);

    // The scheduled pass of the same period, and a settle-now after more money became available (here through
    // the CLI), pay nothing more: one payout per seller and period; the $3.80 waits for the next period.
    await h.service.scheduler.runOnce();
    const late = await pay('4', 0);
    await waitFor(async () => (await escrowStatusOf(late.id)) === 'available', { message: 'hold released' });
    const cli = await runSettleCli(['--seller', sellerId, '--wait', '5']);
    expect(cli.code).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({
      settled: [],
      skipped: [{ settlementId, reason: 'already_settled_this_period', status: 'completed' }],
    });
    expect(
      await h.db
        .selectFrom('settlements')
        .selectAll()
        .where('period_key', '=', settled[0].period.key)
        .execute(),
    ).toHaveLength(1);
    expect((await h.chain.transfersFromEscrow()).length).toBe(payoutsBefore + 1);
    await waitFor(
      async () =>
        (
          await sql<any>`select status from payout_reservations where settlement_id = ${settlementId}`.execute(
            h.ledgerDb,
          )
        ).rows[0]?.status === 'completed',
      { message: 'ledger booked the payout' },
    );

    // Books and chain agree to the micro-USDC: fees 0.60 + 1.00 + 0.20, and the $3.80 not paid out yet.
    const report = await fetch(`${h.escrowLedger.url}/api/v1/reconciliation`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
    }).then((r) => r.json() as Promise<any>);
    expect(report).toMatchObject({
      balanced: true,
      chainBalance: '5.6',
      ledgerBalance: '5.6',
      differences: [],
    });
  });

  it('refuses a settle-now without the operator token or with a bad selection', async () => {
    const anonymous = await fetch(`${h.service.url}/api/v1/operator/settlements/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ all: true }),
    });
    expect(anonymous.status).toBe(401);
    expect(await settleNow({ sellerId, all: true })).toMatchObject({
      status: 400,
      body: { error: { code: 'invalid_request', field: 'sellerId' } },
    });
    expect(await settleNow({ sellerId: 'sel_nobody' })).toMatchObject({ status: 404 });
    expect(await settleNow({ all: true, waitMs: 600_000 })).toMatchObject({
      status: 400,
      body: { error: { code: 'invalid_request', field: 'waitMs' } },
    });
  });

  it('settle-now and a scheduler pass started at the same moment: one settlement, one reservation, one payout', async () => {
    await nextDay(); // a new period, due for the scheduler and for settle-now alike
    const period = periodAt('DAILY', h.clock.now());
    const payment = await pay('20', 0);
    await waitFor(async () => (await escrowStatusOf(payment.id)) === 'available', {
      message: 'hold released',
    });
    const payoutsBefore = (await h.chain.transfersFromEscrow()).length;
    const reservationsBefore = (
      await sql<any>`select settlement_id from payout_reservations`.execute(h.ledgerDb)
    ).rows.length;

    const [answer] = await Promise.all([
      settleNow({ sellerId, waitMs: 20_000 }),
      h.service.scheduler.runOnce(),
    ]);

    // Every settlement of this period (by its start, whatever its key): one, with the id of (seller, period).
    const rows = await h.db
      .selectFrom('settlements')
      .selectAll()
      .where('period_start', '=', period.start)
      .execute();
    expect(rows.map((r) => r.settlement_id)).toEqual([settlementIdFor(sellerId, period)]);
    const settlementId = rows[0]!.settlement_id;
    expect(answer.status).toBe(200);
    // Settle-now paid it, or answers that the scheduler's payout of this period exists.
    if (answer.body.settled.length > 0) {
      expect(answer.body).toMatchObject({ settled: [{ settlementId, amount: '22.8' }], skipped: [] });
    } else {
      expect(answer.body).toMatchObject({
        settled: [],
        skipped: [{ settlementId, reason: 'already_settled_this_period' }],
      });
    }
    const paid = await waitFor(
      async () => {
        const row = await h.db
          .selectFrom('settlements')
          .selectAll()
          .where('settlement_id', '=', settlementId)
          .executeTakeFirst();
        return row?.status === 'completed' ? row : undefined;
      },
      { timeoutMs: 20_000, message: 'payout completed' },
    );
    // $3.80 left from the last period and $19 of this payment: reserved once by the ledger, sent once.
    expect(paid.amount_micro).toBe(22_800_000n);
    expect((await h.chain.transfersFromEscrow()).slice(payoutsBefore)).toEqual([
      { to: formatAddress(testWallets.seller.address), amountMicro: 22_800_000n, txHash: paid.tx_hash },
    ]);
    const reservations = (await sql<any>`select settlement_id from payout_reservations`.execute(h.ledgerDb))
      .rows;
    expect(reservations.length).toBe(reservationsBefore + 1);
    expect(reservations.map((r) => r.settlement_id)).toContain(settlementId);
    await waitFor(
      async () => {
        const report = (await fetch(`${h.escrowLedger.url}/api/v1/reconciliation`, {
          headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
        }).then((r) => r.json())) as any;
        return report.balanced && report.chainBalance === '2.8' && report.ledgerBalance === '2.8';
      },
      { message: 'ledger and chain reconciled after the payout (fees 0.60 + 1.00 + 0.20 + 1.00)' },
    );
  });

  const reconciliation = () =>
    fetch(`${h.escrowLedger.url}/api/v1/reconciliation`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
    }).then((r) => r.json() as Promise<any>);

  it('a seller cannot drain the shared escrow by refunding its own purchase after its payout', async () => {
    // Other sellers' money is in escrow: a held 10 USDC sale of sel_e2e.
    await nextDay();
    await pay('10', 24);
    await publishEvent(
      h.bus,
      sellerUpdated(attackerId, {
        walletAddress: testWallets.stranger.address,
        payoutAddress: testWallets.stranger.address,
        settlementFrequency: 'DAILY',
        minimumSettlement: '1',
      }),
    );
    await waitFor(() =>
      h.db.selectFrom('sellers').selectAll().where('seller_id', '=', attackerId).executeTakeFirst(),
    );
    const attackerBefore = await h.chain.balanceOf(testWallets.stranger.address);
    const escrowBefore = await h.chain.balanceOf(testWallets.escrow.address);

    // The attacker pays its own 0-hour-hold skill 2 USDC and receives its 1.9 payout on chain.
    const own = await pay('2', 0, { sellerId: attackerId, payer: 'stranger' });
    await waitFor(async () => (await escrowStatusOf(own.id)) === 'available', { message: 'hold released' });
    const payout = await settleNow({ sellerId: attackerId, waitMs: 20_000 });
    expect(payout.body.settled).toEqual([
      expect.objectContaining({ sellerId: attackerId, status: 'completed', amount: '1.9' }),
    ]);
    await waitFor(async () => (await escrowStatusOf(own.id)) === 'settled', {
      message: 'ledger booked payout',
    });

    // Then refunds the full 2 USDC: refused, it has nothing left with Paygate to pay it from.
    const refund = await fetch(`${h.escrowLedger.url}/api/v1/refunds`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ATTACKER_KEY}` },
      body: JSON.stringify({ transactionId: own.id, amount: '2', reason: 'refund myself' }),
    });
    expect(refund.status).toBe(409);
    expect(((await refund.json()) as any).error).toMatchObject({
      code: 'insufficient_seller_balance',
      available: '0',
      held: '0',
      shortfall: '1.9',
    });
    const balances = await fetch(`${h.escrowLedger.url}/api/v1/balances`, {
      headers: { authorization: `Bearer ${ATTACKER_KEY}` },
    }).then((r) => r.json() as Promise<any>);
    expect(balances).toMatchObject({ available: '0', owed: '0', settled: '1.9' });

    // Nothing was sent back: the attacker is 0.1 USDC (the fee) poorer, escrow kept everyone else's money.
    await h.service.transfers.runOnce();
    expect(
      await h.db.selectFrom('refunds').selectAll().where('seller_id', '=', attackerId).execute(),
    ).toEqual([]);
    expect(await h.chain.balanceOf(testWallets.stranger.address)).toBe(attackerBefore - 100_000n);
    expect(await h.chain.balanceOf(testWallets.escrow.address)).toBe(escrowBefore + 100_000n);
    const report = await reconciliation();
    expect(report).toMatchObject({
      balanced: true,
      differences: [],
      exposure: { owedBySellers: '0', uncovered: '0' },
    });
    expect(report.chainBalance).toBe(report.ledgerBalance);
  });

  it("pays the platform's 5% to the treasury once, only what platform revenue holds, reconciled", async () => {
    const revenue = (
      await sql<any>`select balance_micro from accounts where kind = 'platform_revenue'`.execute(h.ledgerDb)
    ).rows[0].balance_micro as bigint;
    expect(revenue).toBeGreaterThan(0n);
    const treasuryBefore = await h.chain.balanceOf(TREASURY);
    const post = () =>
      fetch(`${h.service.url}/api/v1/operator/settlements/platform-payouts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${OPERATOR_TOKEN}` },
        body: JSON.stringify({ waitMs: 20_000 }),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
    // Two operators at once: one payout of everything the revenue account holds, the other finds nothing.
    const answers = await Promise.all([post(), post()]);
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
    const paid = answers.find((a) => a.status === 201)!.body;
    expect(answers.find((a) => a.status === 409)!.body.error.code).toBe('nothing_available');
    expect(paid).toMatchObject({ status: 'completed', treasuryAddress: TREASURY });
    expect(parseUsdc(paid.amount)).toBe(revenue);
    expect(await h.chain.balanceOf(TREASURY)).toBe(treasuryBefore + revenue);
    expect((await h.chain.transfersFromEscrow()).filter((t) => t.to === formatAddress(TREASURY))).toEqual([
      { to: formatAddress(TREASURY), amountMicro: revenue, txHash: paid.txHash },
    ]);
    await waitFor(
      async () =>
        (
          await sql<any>`select status from platform_payouts where payout_id = ${paid.payoutId}`.execute(
            h.ledgerDb,
          )
        ).rows[0]?.status === 'completed',
      { message: 'ledger booked the platform payout' },
    );
    const report = await reconciliation();
    expect(report).toMatchObject({ balanced: true, differences: [], exposure: { uncovered: '0' } });
    expect(report.chainBalance).toBe(report.ledgerBalance);
    expect(report.accounts.platform_revenue).toBe('0');
  });

  /** The operator CLI (src/cli/settle.ts) against this settlement service. */
  const runSettleCli = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ['--import', 'tsx', path.join(__dirname, '../src/cli/settle.ts'), ...args],
        {
          env: { ...process.env, SETTLEMENT_URL: h.service.url, OPERATOR_TOKEN },
          timeout: 60_000,
        },
        (error, stdout, stderr) =>
          resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
});
