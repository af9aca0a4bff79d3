import { encodeEnvelope } from '@paygate/bus';
import { formatAddress } from '@paygate/chain';
import { formatUsdc, parseUsdc } from '@paygate/money';
import {
  EventRecorder,
  eventOf,
  increaseTime,
  serveSellersForTests,
  TestClock,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Wallet } from 'ethers';
import { loadConfig, startSettlement } from '../src';
import { periodAt, settlementIdFor } from '../src/schedule/periods';
import { useSettlementHarness } from './harness';
import { publishEvent, sellerUpdated } from './helpers';

const DAY_MS = 86_400_000;
const SELLER_KEY = 'sk_test_payouts_seller_0001';
const OTHER_KEY = 'sk_test_payouts_other_00001';
/** The settlement service's development default (these tests do not set OPERATOR_TOKEN). */
const OPERATOR_TOKEN = 'dev-operator-token';

describe('settlement payouts on anvil', () => {
  // Monday 2026-11-23 08:00 UTC; tests move it a day at a time, and anvil's clock with it.
  const h = useSettlementHarness('stlpay', {
    escrowFunds: '1000',
    clock: new TestClock('2026-11-23T08:00:00Z'),
  });
  const sellerId = 'sel_daily';

  const nextDay = async () => {
    h.clock.advance(DAY_MS);
    await increaseTime(h.chain.anvil.provider, DAY_MS / 1000);
  };
  const settlementsOf = (seller: string) =>
    h.db
      .selectFrom('settlements')
      .selectAll()
      .where('seller_id', '=', seller)
      .orderBy('settlement_id')
      .execute();

  /** A scheduler pass, then the ledger's decisions of what it made due (settlements no longer pending). */
  const runScheduler = async (scheduler = h.service.scheduler) => {
    await scheduler.runOnce();
    await waitFor(
      async () =>
        (
          await h.db
            .selectFrom('settlements')
            .select('settlement_id')
            .where('status', '=', 'pending')
            .execute()
        ).length === 0,
      { timeoutMs: 20_000, message: 'the ledger decided the due settlements' },
    );
  };

  beforeAll(async () => {
    const sellers = await serveSellersForTests(h.bus, {
      [SELLER_KEY]: {
        sellerId,
        walletAddress: testWallets.seller.address,
        payoutAddress: testWallets.seller.address,
        publishableKey: 'pk_test_daily_seller_000',
        apiKeyVersion: 1,
      },
      [OTHER_KEY]: {
        sellerId: 'sel_other',
        walletAddress: testWallets.stranger.address,
        payoutAddress: testWallets.stranger.address,
        publishableKey: 'pk_test_other_seller_000',
        apiKeyVersion: 1,
      },
    });
    h.onStop(() => sellers.stop());
  });

  it('accumulates below the minimum across days, then pays out exactly the reserved amount', async () => {
    const completed = new EventRecorder(h.bus, 'settlement.completed');
    await publishEvent(
      h.bus,
      sellerUpdated(sellerId, { settlementFrequency: 'DAILY', minimumSettlement: '10' }),
    );
    await waitFor(() =>
      h.db.selectFrom('sellers').selectAll().where('seller_id', '=', sellerId).executeTakeFirst(),
    );

    // The day the seller appears: its first period starts tomorrow.
    h.ledger.credit(sellerId, '4');
    await runScheduler();
    expect(await settlementsOf(sellerId)).toHaveLength(0);

    // Day 1: $4 available, below the $10 minimum: skipped, the money stays.
    await nextDay();
    await runScheduler();
    let rows = await settlementsOf(sellerId);
    expect(rows.map((r) => [r.status, r.skip_reason, r.available_micro])).toEqual([
      ['skipped', 'below_minimum', 4_000_000n],
    ]);
    // A second pass the same day changes nothing.
    await runScheduler();
    expect(await settlementsOf(sellerId)).toHaveLength(1);

    // Day 2: $9.50 accumulated: still below.
    h.ledger.credit(sellerId, '5.5');
    await nextDay();
    await runScheduler();
    rows = await settlementsOf(sellerId);
    expect(rows.map((r) => r.status)).toEqual(['skipped', 'skipped']);
    expect(rows[1]!.available_micro).toBe(9_500_000n);

    // Day 3: $12.250001 accumulated: the ledger reserves it all and it is sent.
    h.ledger.credit(sellerId, '2.750001');
    const sellerBefore = await h.chain.balanceOf(testWallets.seller.address);
    const escrowBefore = await h.chain.balanceOf(testWallets.escrow.address);
    await nextDay();
    await runScheduler();
    const [event] = await completed.waitForCount(1, 20_000);
    rows = await settlementsOf(sellerId);
    const paid = rows[2]!;
    expect(paid.status).toBe('completed');
    expect(paid.amount_micro).toBe(12_250_001n);
    expect(paid.tx_hash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await h.chain.balanceOf(testWallets.seller.address)).toBe(sellerBefore + 12_250_001n);
    expect(await h.chain.balanceOf(testWallets.escrow.address)).toBe(escrowBefore - 12_250_001n);
    expect(event!.data).toEqual({
      settlementId: paid.settlement_id,
      sellerId,
      amount: '12.250001',
      payoutAddress: testWallets.seller.address,
      txHash: paid.tx_hash,
      completedAt: h.clock.now().toISOString(),
    });
    await waitFor(() => h.ledger.reservations.get(paid.settlement_id)?.status === 'completed');
    expect(h.ledger.reservations.get(paid.settlement_id)).toMatchObject({
      amountMicro: 12_250_001n,
      status: 'completed',
    });
    // Asked once per settlement, the minimum as a decimal string per seller setting; the ledger named the address.
    expect(h.ledger.dues.filter((d) => d.settlementId === paid.settlement_id)).toEqual([
      { settlementId: paid.settlement_id, sellerId, minimumAmount: '10', dueAt: h.clock.now().toISOString() },
    ]);

    // Same day again: no second settlement, no second transfer, no second event.
    await runScheduler();
    await h.service.transfers.runOnce();
    expect(await settlementsOf(sellerId)).toHaveLength(3);
    const transfers = await h.chain.transfersFromEscrow();
    expect(transfers.filter((t) => t.to === testWallets.seller.address)).toEqual([
      { to: testWallets.seller.address, amountMicro: 12_250_001n, txHash: paid.tx_hash },
    ]);
    expect(completed.events).toHaveLength(1);
    completed.stop();
  });

  it('settles WEEKLY sellers on Mondays and MONTHLY sellers on the 1st', async () => {
    // now is Thursday 2026-11-26.
    expect(h.clock.now().getUTCDay()).toBe(4);
    await publishEvent(h.bus, sellerUpdated('sel_weekly', { settlementFrequency: 'WEEKLY' }));
    await publishEvent(h.bus, sellerUpdated('sel_monthly', { settlementFrequency: 'MONTHLY' }));
    await waitFor(async () => (await h.db.selectFrom('sellers').selectAll().execute()).length === 3);
    h.ledger.credit('sel_weekly', '1');
    h.ledger.credit('sel_monthly', '1');
    const seen: Record<string, string[]> = { sel_weekly: [], sel_monthly: [] };
    // Thursday 26th .. Wednesday 2nd of December.
    for (let day = 0; day < 7; day++) {
      await runScheduler();
      for (const seller of Object.keys(seen)) {
        seen[seller] = (await settlementsOf(seller)).map((r) => r.period_start.toISOString().slice(0, 10));
      }
      await nextDay();
    }
    expect(seen.sel_weekly).toEqual(['2026-11-30']); // Monday
    expect(seen.sel_monthly).toEqual(['2026-12-01']); // 1st
    const weekly = (await settlementsOf('sel_weekly'))[0]!;
    expect(weekly.period_end.toISOString()).toBe('2026-12-07T00:00:00.000Z');
    expect(weekly.status).toBe('skipped');
  });

  it('two schedulers at once create one settlement per seller and period', async () => {
    h.ledger.credit(sellerId, '20');
    const second = await startSettlement(loadConfig(h.settlementEnv()), { now: h.clock.now });
    try {
      await Promise.all([runScheduler(), runScheduler(second.scheduler), runScheduler()]);
      const today = (await settlementsOf(sellerId)).filter(
        (r) => r.period_start.getTime() <= h.clock.nowMs() && r.period_end.getTime() > h.clock.nowMs(),
      );
      expect(today).toHaveLength(1);
      await waitFor(
        async () =>
          (
            await h.db
              .selectFrom('settlements')
              .select('status')
              .where('settlement_id', '=', today[0]!.settlement_id)
              .executeTakeFirst()
          )?.status === 'completed',
        { timeoutMs: 20_000 },
      );
      const toSeller = (await h.chain.transfersFromEscrow()).filter(
        (t) => t.to === testWallets.seller.address,
      );
      expect(toSeller.map((t) => t.amountMicro)).toEqual([12_250_001n, parseUsdc('20')]);
    } finally {
      await second.stop();
    }
  });

  it('GET /api/v1/settlements lists the seller its own settlements', async () => {
    const unauthorised = await fetch(`${h.service.url}/api/v1/settlements`);
    expect(unauthorised.status).toBe(401);

    const response = await fetch(`${h.service.url}/api/v1/settlements?limit=2`, {
      headers: { authorization: `Bearer ${SELLER_KEY}` },
    });
    expect(response.status).toBe(200);
    const page = (await response.json()) as { data: any[]; hasMore: boolean; nextCursor: string };
    expect(page.data).toHaveLength(2);
    expect(page.hasMore).toBe(true);
    expect(page.data[0]).toMatchObject({
      sellerId,
      status: 'completed',
      amount: '20',
      period: { frequency: 'DAILY' },
    });
    expect(page.data[0].txHash).toMatch(/^0x[0-9a-f]{64}$/);
    const rest = await fetch(`${h.service.url}/api/v1/settlements?starting_after=${page.nextCursor}`, {
      headers: { authorization: `Bearer ${SELLER_KEY}` },
    }).then((r) => r.json() as Promise<{ data: any[] }>);
    // Day 1 (oldest) was skipped below the minimum; the weekly test's days had nothing available.
    expect(rest.data.at(-1)).toMatchObject({
      status: 'skipped',
      amount: null,
      availableAmount: '4',
      minimumAmount: '10',
      skipReason: 'below_minimum',
      txHash: null,
    });
    const completedOnly = await fetch(`${h.service.url}/api/v1/settlements?status=completed`, {
      headers: { authorization: `Bearer ${SELLER_KEY}` },
    }).then((r) => r.json() as Promise<{ data: any[] }>);
    expect(completedOnly.data.map((s) => s.amount)).toEqual(['20', '12.250001']);

    const one = await fetch(`${h.service.url}/api/v1/settlements/${page.data[1].settlementId}`, {
      headers: { authorization: `Bearer ${SELLER_KEY}` },
    });
    expect(one.status).toBe(200);
    const other = await fetch(`${h.service.url}/api/v1/settlements/${page.data[1].settlementId}`, {
      headers: { authorization: `Bearer ${OTHER_KEY}` },
    });
    expect(other.status).toBe(404);

    const bad = await fetch(`${h.service.url}/api/v1/settlements?limit=0`, {
      headers: { authorization: `Bearer ${SELLER_KEY}` },
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error).toMatchObject({ field: 'limit' });

    const openapi = await fetch(`${h.service.url}/api/v1/openapi/settlement.json`).then(
      (r) => r.json() as any,
    );
    expect(Object.keys(openapi.paths)).toEqual([
      '/api/v1/settlements',
      '/api/v1/settlements/{settlementId}',
      '/api/v1/operator/settlements/run',
      '/api/v1/operator/settlements/platform-payouts',
      '/api/v1/openapi/settlement.json',
    ]);
  });

  it('exposes payout, refund and stuck-transfer metrics', async () => {
    const text = await fetch(`${h.service.url}/metrics`).then((r) => r.text());
    expect(text).toMatch(/settlement_payouts_sent_total\{[^}]*\} [1-9]/);
    expect(text).toMatch(/settlement_refunds_sent_total\{[^}]*\} 0/);
    expect(text).toMatch(/settlement_stuck_transfers\{[^}]*\} 0/);
  });

  it('a payout that can never be sent gives its reservation back through payout.failed, once', async () => {
    // More than the escrow wallet holds: the pre-flight fails, and with one allowed attempt it is given up.
    await h.service.stop();
    await h.start({ MAX_PREFLIGHT_ATTEMPTS: '1' });
    const failedEvents = new EventRecorder(h.bus, 'payout.failed');
    const escrowMicro = await h.chain.balanceOf(testWallets.escrow.address);
    const amount = formatUsdc(escrowMicro + parseUsdc('4000'));
    h.ledger.credit(sellerId, amount);
    await nextDay();
    const transfersBefore = (await h.chain.transfersFromEscrow()).length;
    await runScheduler();
    const settlement = (await settlementsOf(sellerId)).at(-1)!;
    const settlementRow = () =>
      h.db
        .selectFrom('settlements')
        .select(['status', 'failure_reason'])
        .where('settlement_id', '=', settlement.settlement_id)
        .executeTakeFirst();
    await waitFor(async () => (await settlementRow())?.status === 'failed', {
      timeoutMs: 60_000,
      message: async () =>
        `the payout was never given up: settlement ${JSON.stringify(await settlementRow())}, its transfers ${JSON.stringify(
          await h.db
            .selectFrom('outgoing_transfers')
            .select(['status', 'amount_micro', 'tx_hash', 'last_error', 'preflight_attempts', 'created_at'])
            .where('idempotency_key', '=', settlement.settlement_id)
            .execute(),
          (_key, value) => (typeof value === 'bigint' ? value.toString() : value),
        )}, escrow held ${escrowMicro} before and holds ${await h.chain.balanceOf(testWallets.escrow.address)} (now ${new Date().toISOString()})`,
    });
    const [failed] = await failedEvents.waitForCount(1, 20_000);
    expect(failed!.data).toMatchObject({
      payoutId: settlement.settlement_id,
      kind: 'seller',
      sellerId,
      amount,
      reason: expect.stringMatching(/pre-flight/),
    });
    await waitFor(() => h.ledger.reservations.get(settlement.settlement_id)?.status === 'given_back');
    expect(h.ledger.available.get(sellerId)).toBe(parseUsdc(amount));
    expect((await settlementRow())!.failure_reason).toMatch(/pre-flight/);
    // Further passes tell the ledger nothing more; nothing was signed, nothing sent.
    await runScheduler();
    await h.service.transfers.runOnce();
    expect(
      failedEvents.events.filter((e) => (e.data as any).payoutId === settlement.settlement_id),
    ).toHaveLength(1);
    expect((await h.chain.transfersFromEscrow()).length).toBe(transfersBefore);
    failedEvents.stop();
  }, 90_000);

  /** POST /api/v1/operator/settlements/run as an operator (the development default token). */
  const settleNow = async (body: Record<string, unknown>) => {
    const response = await fetch(`${h.service.url}/api/v1/operator/settlements/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${OPERATOR_TOKEN}` },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as any };
  };
  const raceSellers = Array.from({ length: 6 }, (_, i) => ({
    sellerId: `sel_race_${i}`,
    payoutAddress: formatAddress(Wallet.createRandom().address),
  }));
  const payoutsTo = async (address: string) =>
    (await h.chain.transfersFromEscrow()).filter((t) => t.to === address);

  it('settle-now and a scheduler pass started at the same moment pay each seller once for the period', async () => {
    // The last test's payout was given back: keep it out of this period (it can never be sent).
    h.ledger.available.set(sellerId, 0n);
    for (const { sellerId: id, payoutAddress } of raceSellers) {
      await publishEvent(
        h.bus,
        sellerUpdated(id, { payoutAddress, settlementFrequency: 'DAILY', minimumSettlement: '1' }),
      );
    }
    await waitFor(
      async () =>
        (
          await h.db
            .selectFrom('sellers')
            .select('seller_id')
            .where('seller_id', 'like', 'sel_race_%')
            .execute()
        ).length === raceSellers.length,
    );
    // The next day is the sellers' first period: due for the scheduler and for settle-now alike.
    await nextDay();
    const period = periodAt('DAILY', h.clock.now());
    for (const [i, { sellerId: id }] of raceSellers.entries()) h.ledger.credit(id, `2.5000${i}`);

    const [answers] = await Promise.all([
      Promise.all(raceSellers.map(({ sellerId: id }) => settleNow({ sellerId: id }))),
      runScheduler(),
    ]);

    for (const [i, { sellerId: id, payoutAddress }] of raceSellers.entries()) {
      const rows = await settlementsOf(id);
      // One settlement for the seller and period, whoever created it.
      expect(rows.map((r) => [r.period_key, r.settlement_id])).toEqual([
        [period.key, settlementIdFor(id, period)],
      ]);
      const answer = answers[i]!;
      expect(answer.status).toBe(200);
      // Settle-now either paid it, or says the scheduler's payout of this period already exists.
      const seen = [...answer.body.settled, ...answer.body.skipped];
      expect(seen).toEqual([expect.objectContaining({ sellerId: id, settlementId: rows[0]!.settlement_id })]);
      if (answer.body.skipped.length > 0) {
        expect(answer.body.skipped[0].reason).toBe('already_settled_this_period');
      }
      const reserved = [...h.ledger.reservations.values()].filter((r) => r.sellerId === id);
      expect(reserved.map((r) => r.amountMicro)).toEqual([parseUsdc(`2.5000${i}`)]);
      const paid = await waitFor(
        async () => {
          const row = (await settlementsOf(id))[0]!;
          return row.status === 'completed' ? row : undefined;
        },
        { timeoutMs: 30_000, message: `${id}'s payout completed` },
      );
      // Exactly one transfer on chain to the seller, of the reserved amount.
      expect(await payoutsTo(payoutAddress)).toEqual([
        { to: payoutAddress, amountMicro: parseUsdc(`2.5000${i}`), txHash: paid.tx_hash },
      ]);
    }
    // Another pass and another settle-now in the same period send nothing more.
    await runScheduler();
    const again = await settleNow({ sellerId: raceSellers[0]!.sellerId });
    expect(again.body).toMatchObject({
      settled: [],
      skipped: [{ reason: 'already_settled_this_period', status: 'completed' }],
    });
    await h.service.transfers.runOnce();
    for (const { payoutAddress } of raceSellers) expect(await payoutsTo(payoutAddress)).toHaveLength(1);
  });

  it('settle-now after the scheduler paid the period sends nothing and says which payout exists', async () => {
    const { sellerId: id, payoutAddress } = raceSellers[1]!;
    await nextDay();
    const period = periodAt('DAILY', h.clock.now());
    h.ledger.credit(id, '3');
    const before = await payoutsTo(payoutAddress);

    await runScheduler();
    // At once, while the scheduler's payout may still be on its way: the same settlement, nothing new.
    const during = await settleNow({ sellerId: id, waitMs: 20_000 });
    expect(during.status).toBe(200);
    expect(during.body).toMatchObject({
      settled: [],
      skipped: [
        {
          sellerId: id,
          settlementId: settlementIdFor(id, period),
          reason: 'already_settled_this_period',
        },
      ],
    });
    expect(['sending', 'completed']).toContain(during.body.skipped[0].status);
    const paid = await waitFor(
      async () => {
        const row = (await settlementsOf(id)).find((r) => r.period_key === period.key);
        return row?.status === 'completed' ? row : undefined;
      },
      { timeoutMs: 30_000, message: 'the scheduled payout completed' },
    );

    // More money becomes available in the same period: settle-now still sends nothing, and shows the payout.
    h.ledger.credit(id, '4');
    const after = await settleNow({ sellerId: id, waitMs: 20_000 });
    expect(after.body).toEqual({
      settled: [],
      skipped: [
        {
          sellerId: id,
          settlementId: paid.settlement_id,
          reason: 'already_settled_this_period',
          status: 'completed',
          availableAmount: null,
          txHash: paid.tx_hash,
        },
      ],
      truncated: false,
    });
    await h.service.transfers.runOnce();
    expect((await payoutsTo(payoutAddress)).slice(before.length)).toEqual([
      { to: payoutAddress, amountMicro: parseUsdc('3'), txHash: paid.tx_hash },
    ]);
    expect((await settlementsOf(id)).filter((r) => r.period_key === period.key)).toHaveLength(1);
    expect(h.ledger.available.get(id)).toBe(parseUsdc('4')); // waits for the next period
  });
  /** A DAILY seller with a minimum of 1 and a payout address of its own, first due on the next day. */
  const newDailySeller = async (id: string) => {
    const payoutAddress = formatAddress(Wallet.createRandom().address);
    await publishEvent(
      h.bus,
      sellerUpdated(id, { payoutAddress, settlementFrequency: 'DAILY', minimumSettlement: '1' }),
    );
    await waitFor(() =>
      h.db.selectFrom('sellers').select('seller_id').where('seller_id', '=', id).executeTakeFirst(),
    );
    return payoutAddress;
  };
  /** A scheduler pass without waiting for the ledger's decisions (some are held back). */
  const runSchedulerOnly = (scheduler = h.service.scheduler) => scheduler.runOnce();
  const completedPayout = (id: string) =>
    waitFor(
      async () => {
        const row = (await settlementsOf(id)).at(-1);
        return row?.status === 'completed' ? row : undefined;
      },
      { timeoutMs: 30_000, message: `${id}'s payout completed` },
    );

  it('a ledger slow to decide: settle-now answers ledger_unavailable with the settlement pending; it is paid once the ledger decides, never given back', async () => {
    const id = 'sel_slow_ledger';
    const payoutAddress = await newDailySeller(id);
    await nextDay();
    h.ledger.credit(id, '3');
    const settlementId = settlementIdFor(id, periodAt('DAILY', h.clock.now()));
    h.ledger.withheld.add(settlementId);
    const slow = await fetch(`${h.service.url}/api/v1/operator/settlements/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${OPERATOR_TOKEN}` },
      body: JSON.stringify({ sellerId: id }),
    });
    // Bounded by LEDGER_TIMEOUT_MS: the answer says the ledger has not decided; nothing is sent or given back.
    expect(slow.status).toBe(200);
    expect(((await slow.json()) as any).skipped).toEqual([
      expect.objectContaining({ settlementId, reason: 'ledger_unavailable', status: 'pending' }),
    ]);
    await h.service.scheduler.runOnce(); // the scheduler's pass asks nothing more of a pending settlement
    expect(h.ledger.dues.filter((d) => d.settlementId === settlementId)).toHaveLength(1);
    // Hours later the ledger decides: the payout is sent, once.
    h.clock.advanceHours(3);
    await h.ledger.release(settlementId);
    const paid = await completedPayout(id);
    expect(paid.settlement_id).toBe(settlementId);
    expect(await payoutsTo(payoutAddress)).toEqual([
      { to: payoutAddress, amountMicro: parseUsdc('3'), txHash: paid.tx_hash },
    ]);
    // The ledger hears settlement.completed once the outbox relay publishes it.
    await waitFor(() => h.ledger.reservations.get(settlementId)?.status === 'completed', {
      message: 'the ledger booked the payout as sent',
    });
  });

  it('a payout is sent once when the ledger’s payout.reserved is delivered again, or twice under two event ids, to two replicas', async () => {
    const id = 'sel_redelivered';
    const payoutAddress = await newDailySeller(id);
    await nextDay();
    h.ledger.credit(id, '2');
    const settlementId = settlementIdFor(id, periodAt('DAILY', h.clock.now()));
    const second = await startSettlement(loadConfig(h.settlementEnv()), { now: h.clock.now });
    try {
      // The ledger's outbox relay publishes its decision again (same event id: JetStream dedupes nothing here,
      // the msgID differs), and a second copy under a new event id reaches the other replica.
      const reserved = eventOf('payout.reserved', {
        payoutId: settlementId,
        kind: 'seller',
        sellerId: id,
        amount: '2',
        payoutAddress,
        reservedAt: h.clock.now().toISOString(),
      });
      h.ledger.withheld.add(settlementId);
      await runSchedulerOnly(second.scheduler);
      h.ledger.available.set(id, 0n);
      h.ledger.reservations.set(settlementId, {
        sellerId: id,
        amountMicro: 2_000_000n,
        payoutAddress,
        status: 'reserved',
      });
      await Promise.all([
        h.bus.js.publish(h.bus.subjectFor('payout.reserved'), encodeEnvelope(reserved), {
          msgID: `${reserved.id}:a`,
        }),
        h.bus.js.publish(h.bus.subjectFor('payout.reserved'), encodeEnvelope(reserved), {
          msgID: `${reserved.id}:b`,
        }),
        h.bus.js.publish(
          h.bus.subjectFor('payout.reserved'),
          encodeEnvelope(eventOf('payout.reserved', reserved.data)),
        ),
      ]);
      const paid = await completedPayout(id);
      await Promise.all([h.service.transfers.runOnce(), second.transfers.runOnce()]);
      expect(await payoutsTo(payoutAddress)).toEqual([
        { to: payoutAddress, amountMicro: parseUsdc('2'), txHash: paid.tx_hash },
      ]);
      const transfers = await h.db
        .selectFrom('outgoing_transfers')
        .select('transfer_id')
        .where('idempotency_key', '=', settlementId)
        .execute();
      expect(transfers).toHaveLength(1);
    } finally {
      await second.stop();
    }
  });
});
