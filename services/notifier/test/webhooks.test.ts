import type { Bus } from '@paygate/bus';
import { verifyWebhook } from '@paygate/gateway-middleware';
import {
  createTestEnvironment,
  openSchema,
  serveSellersForTests,
  TestClock,
  type TestEnvironment,
  waitFor,
} from '@paygate/testing';
import type { Kysely } from 'kysely';
import { loadConfig, type NotifierConfig, type RunningNotifier, startNotifier } from '../src';
import type { NotifierDatabase } from '../src/db';
import {
  OTHER_SELLER_ID,
  publish,
  SELLER_ID,
  sellerIdentity,
  sellerUpdated,
  serveWebhookSecrets,
  sessionSnapshot,
  WebhookReceiver,
} from './helpers';

jest.setTimeout(45_000);

const SECRET = 'whsec_seller_one_0123456789';
const API_KEY = 'sk_test_seller_one_0123456789';
const OTHER_API_KEY = 'sk_test_seller_two_0123456789';
const TX = `0x${'3'.repeat(64)}`;
const PAYER = `0x${'4'.repeat(40)}`;

describe('notifier webhooks', () => {
  let env: TestEnvironment;
  let bus: Bus;
  let receiver: WebhookReceiver;
  let notifier: RunningNotifier;
  let db: Kysely<NotifierDatabase>;
  // The notifier's clock: retry schedules are checked by moving it, not by sleeping.
  const clock = new TestClock('2026-11-22T12:00:00.000Z');
  const configFor = (): NotifierConfig => ({
    ...loadConfig(
      env.envFor('notifier', {
        WEBHOOK_POLL_INTERVAL_MS: '50',
        // Long enough for a busy machine's receiver to answer (a timed-out delivery waits for a retry the frozen
        // clock never reaches); the 'hang' answer below waits it out once.
        WEBHOOK_TIMEOUT_MS: '3000',
        WEBHOOK_CLAIM_LEASE_MS: '6000',
      }),
    ),
    now: clock.now,
  });
  const api = (path: string, init: RequestInit = {}, key = API_KEY) =>
    fetch(`${notifier.url}${path}`, {
      ...init,
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        ...(init.headers ?? {}),
      },
    });
  const deliveriesOf = (eventId: string) =>
    db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('event_id', '=', eventId)
      .orderBy('created_at')
      .execute();
  /**
   * The positive signal before asserting that a delivery was NOT attempted (nor claimed): two marker events
   * delivered one after the other. Passes never overlap and claims are serialized, so once the second is
   * delivered, every claim that began before it has committed: a delivery taken early would be leased by then.
   */
  const dispatchPassesCompleted = async (label: string) => {
    for (const n of [1, 2]) {
      const marker = await publish(bus, 'payment.confirmed', 'escrow-ledger', paymentData(`${label}_${n}`));
      await waitFor(async () => (await deliveriesOf(marker))[0]?.status === 'delivered', {
        message: `marker ${label}_${n} delivered`,
      });
    }
  };
  const paymentData = (paymentId: string) => ({
    paymentId,
    source: 'checkout' as const,
    sellerId: SELLER_ID,
    skillId: null,
    skillName: null,
    endpointId: null,
    sessionId: 'cs_wh_1',
    payer: PAYER,
    amount: '5.004217',
    network: 'local' as const,
    chainId: 31337,
    token: `0x${'c'.repeat(40)}`,
    txHash: TX,
    logIndex: 0,
    holdPeriodHours: 0,
    confirmedAt: new Date().toISOString(),
  });

  beforeAll(async () => {
    env = await createTestEnvironment('notifwh');
    bus = await env.bus();
    receiver = await new WebhookReceiver().start();
    await serveWebhookSecrets(bus, { [SELLER_ID]: { secret: SECRET, version: 1 } });
    await serveSellersForTests(bus, {
      [API_KEY]: sellerIdentity(SELLER_ID),
      [OTHER_API_KEY]: sellerIdentity(OTHER_SELLER_ID),
    });
    notifier = await startNotifier(configFor(), { random: () => 1 });
    db = openSchema<NotifierDatabase>(env.schemaFor('notifier'));
    await publish(bus, 'seller.updated', 'registry', sellerUpdated({ webhookUrl: receiver.url }));
    await waitFor(async () => (await db.selectFrom('sellers').selectAll().executeTakeFirst())?.webhook_url, {
      message: 'seller projected',
    });
  });

  afterAll(async () => {
    await notifier?.stop();
    await db?.destroy();
    await receiver?.stop();
    await env?.cleanup();
  });

  beforeEach(() => {
    receiver.received.length = 0;
    receiver.respond = () => 200;
  });

  it('delivers payment, refund, settlement and session events, signed, with a stable event id', async () => {
    const ids = {
      payment: await publish(bus, 'payment.confirmed', 'escrow-ledger', paymentData('pay_1')),
      requested: await publish(bus, 'refund.requested', 'escrow-ledger', {
        event: 'refund.requested',
        refundRequestId: 'rr_1',
        transactionId: 'tx_1',
        sellerId: SELLER_ID,
        reason: 'never arrived',
        requestedAt: new Date().toISOString(),
      }),
      completed: await publish(bus, 'refund.completed', 'settlement', {
        event: 'refund.completed',
        refundId: 'rf_1',
        transactionId: 'tx_1',
        sellerId: SELLER_ID,
        refundTxHash: TX,
        amount: '5.004217',
        completedAt: new Date().toISOString(),
      }),
      settlement: await publish(bus, 'settlement.completed', 'settlement', {
        settlementId: 'st_1',
        sellerId: SELLER_ID,
        amount: '12.5',
        payoutAddress: `0x${'b'.repeat(40)}`,
        txHash: TX,
        completedAt: new Date().toISOString(),
      }),
      session: await publish(
        bus,
        'checkout.session_paid',
        'checkout',
        sessionSnapshot({ sessionId: 'cs_wh_1', status: 'paid' }),
      ),
    };
    // Another seller's event (no webhook URL) produces nothing.
    await publish(bus, 'payment.confirmed', 'escrow-ledger', {
      ...paymentData('pay_other'),
      sellerId: OTHER_SELLER_ID,
    });
    await waitFor(() => receiver.received.length >= 5, { message: 'five webhooks' });

    const byType = new Map(receiver.received.map((r) => [r.headers['paygate-event-type'], r]));
    for (const received of receiver.received) {
      // The seller's own check, with the library a seller uses, against our clock.
      expect(
        verifyWebhook({
          payload: received.body,
          header: received.headers['paygate-signature'],
          secret: SECRET,
          now: clock.now,
        }),
      ).toEqual({ timestamp: Math.floor(clock.nowMs() / 1000) });
      const body = JSON.parse(received.body);
      expect(received.headers['paygate-event-id']).toBe(body.id);
      expect(body.data.event).toBe(body.event);
      expect(Object.keys(body).slice(0, 3)).toEqual(['id', 'event', 'createdAt']);
      expect(Object.keys(body).at(-1)).toBe('data');
    }
    expect(() =>
      verifyWebhook({
        payload: receiver.received[0]!.body,
        header: receiver.received[0]!.headers['paygate-signature'],
        secret: 'whsec_wrong',
        now: clock.now,
      }),
    ).toThrow('does not match');

    const requested = JSON.parse(byType.get('refund.requested')!.body);
    expect(requested).toMatchObject({
      id: ids.requested,
      event: 'refund.requested',
      data: { event: 'refund.requested', transactionId: 'tx_1', reason: 'never arrived' },
    });
    const completed = JSON.parse(byType.get('refund.completed')!.body);
    expect(completed.data).toMatchObject({
      event: 'refund.completed',
      transactionId: 'tx_1',
      refundTxHash: TX,
      amount: '5.004217',
    });
    expect(JSON.parse(byType.get('payment.confirmed')!.body)).toMatchObject({
      id: ids.payment,
      data: { event: 'payment.confirmed', paymentId: 'pay_1', amount: '5.004217', txHash: TX },
    });
    expect(JSON.parse(byType.get('settlement.completed')!.body).data).toMatchObject({
      amount: '12.5',
      txHash: TX,
    });
    expect(JSON.parse(byType.get('checkout.session_paid')!.body).data).toMatchObject({
      sessionId: 'cs_wh_1',
      status: 'paid',
    });
    await waitFor(async () => (await deliveriesOf(ids.session))[0]?.status === 'delivered', {
      message: 'recorded',
    });
    expect(await deliveriesOf(ids.session)).toEqual([
      expect.objectContaining({ status: 'delivered', attempt_count: 1 }),
    ]);
    expect(
      await db
        .selectFrom('webhook_deliveries')
        .where('seller_id', '=', OTHER_SELLER_ID)
        .selectAll()
        .execute(),
    ).toEqual([]);
  });

  it('announces a payout address change the wallet signed to the seller, before it takes effect', async () => {
    const effectiveAt = new Date(clock.nowMs() + 48 * 3_600_000).toISOString();
    const id = await publish(bus, 'seller.payout_address_change_requested', 'registry', {
      sellerId: SELLER_ID,
      walletAddress: `0x${'b'.repeat(40)}`,
      currentPayoutAddress: `0x${'b'.repeat(40)}`,
      newPayoutAddress: `0x${'c'.repeat(40)}`,
      requestedAt: clock.now().toISOString(),
      effectiveAt,
    });
    const received = await waitFor(
      () => receiver.received.find((r) => r.headers['paygate-event-id'] === id),
      { message: 'the payout change webhook' },
    );
    expect(received.headers['paygate-event-type']).toBe('seller.payout_address_change_requested');
    expect(
      verifyWebhook({
        payload: received.body,
        header: received.headers['paygate-signature'],
        secret: SECRET,
        now: clock.now,
      }),
    ).toEqual({ timestamp: Math.floor(clock.nowMs() / 1000) });
    expect(JSON.parse(received.body)).toMatchObject({
      id,
      event: 'seller.payout_address_change_requested',
      newPayoutAddress: `0x${'c'.repeat(40)}`,
      effectiveAt,
    });
  });

  it('puts the documented payload fields at the top level of the body, beside id, createdAt and data', async () => {
    const ids = {
      requested: await publish(bus, 'refund.requested', 'escrow-ledger', {
        event: 'refund.requested',
        refundRequestId: 'rr_top',
        transactionId: 'tx_top',
        sellerId: SELLER_ID,
        reason: 'wrong size',
        requestedAt: '2026-11-22T12:00:00.000Z',
      }),
      completed: await publish(bus, 'refund.completed', 'settlement', {
        event: 'refund.completed',
        refundId: 'rf_top',
        transactionId: 'tx_top',
        sellerId: SELLER_ID,
        refundTxHash: TX,
        amount: '1.5',
        completedAt: '2026-11-22T12:00:01.000Z',
      }),
      payment: await publish(bus, 'payment.confirmed', 'escrow-ledger', paymentData('pay_top')),
      session: await publish(
        bus,
        'checkout.session_paid',
        'checkout',
        sessionSnapshot({ sessionId: 'cs_top', status: 'paid', createdAt: '2026-11-01T00:00:00.000Z' }),
      ),
    };
    const bodyOf = async (eventId: string) => {
      const received = await waitFor(
        () => receiver.received.find((r) => r.headers['paygate-event-id'] === eventId),
        { message: `webhook ${eventId}` },
      );
      // The signature still covers the bytes sent, whatever their shape.
      verifyWebhook({
        payload: received.body,
        header: received.headers['paygate-signature'],
        secret: SECRET,
        now: clock.now,
      });
      return JSON.parse(received.body);
    };

    // A receiver written from docs/api.md's table reads these fields from the body itself.
    const requested = await bodyOf(ids.requested);
    expect({
      event: requested.event,
      transactionId: requested.transactionId,
      reason: requested.reason,
    }).toEqual({ event: 'refund.requested', transactionId: 'tx_top', reason: 'wrong size' });
    const completed = await bodyOf(ids.completed);
    expect({
      event: completed.event,
      transactionId: completed.transactionId,
      refundTxHash: completed.refundTxHash,
      amount: completed.amount,
    }).toEqual({ event: 'refund.completed', transactionId: 'tx_top', refundTxHash: TX, amount: '1.5' });
    // Every kind does the same; id and createdAt are the event's, data keeps the whole payload.
    const payment = await bodyOf(ids.payment);
    expect(payment).toMatchObject({ id: ids.payment, paymentId: 'pay_top', amount: '5.004217', txHash: TX });
    expect(payment.data).toMatchObject({ event: 'payment.confirmed', paymentId: 'pay_top' });
    const session = await bodyOf(ids.session);
    expect(session).toMatchObject({ id: ids.session, sessionId: 'cs_top', status: 'paid' });
    // The session's own createdAt stays in data: the top-level one is the event's time.
    expect(session.data.createdAt).toBe('2026-11-01T00:00:00.000Z');
    expect(session.createdAt).not.toBe('2026-11-01T00:00:00.000Z');
    expect(Object.keys(session).slice(0, 3)).toEqual(['id', 'event', 'createdAt']);
    expect(Object.keys(session).at(-1)).toBe('data');
  });

  it('retries 5xx, 408, 429, timeouts with exponential backoff on the stored schedule, then delivers', async () => {
    const answers: Array<number | 'hang'> = [503, 408, 429, 'hang', 200];
    // Only this event's attempts take the scripted answers: a late delivery of an earlier test's event (or a
    // marker below) gets 200 and cannot shift the script.
    receiver.respond = (r) => (JSON.parse(r.body).paymentId === 'pay_retry' ? (answers.shift() ?? 200) : 200);
    const eventId = await publish(bus, 'payment.confirmed', 'escrow-ledger', paymentData('pay_retry'));
    const start = clock.nowMs();
    const expectedDelaysMs = [30_000, 60_000, 120_000, 240_000];
    for (const [i, delayMs] of expectedDelaysMs.entries()) {
      const [row] = await waitFor(
        async () => {
          const rows = await deliveriesOf(eventId);
          return rows[0]?.attempt_count === i + 1 ? rows : undefined;
        },
        { message: `attempt ${i + 1} recorded` },
      );
      expect(row!.status).toBe('pending');
      // random() = 1 gives the full delay: 30 s, doubling.
      expect(row!.next_attempt_at!.getTime() - clock.nowMs()).toBe(delayMs);
      // Not retried before its time: two marker events are delivered after it, the second by a pass that
      // started after the first marker's pass had ended, and a pass claims every delivery due at the clock.
      // Had the dispatcher taken this one early, it would be leased (or its attempt recorded) by now.
      await dispatchPassesCompleted(`pay_retry_marker_${i}`);
      expect((await deliveriesOf(eventId))[0]).toMatchObject({
        attempt_count: i + 1,
        status: 'pending',
        leased_until: null,
      });
      clock.advance(delayMs);
    }
    const [delivered] = await waitFor(
      async () => {
        const rows = await deliveriesOf(eventId);
        return rows[0]?.status === 'delivered' ? rows : undefined;
      },
      { message: 'delivered on the fifth attempt' },
    );
    expect(delivered!.attempt_count).toBe(5);
    const attempts = await db
      .selectFrom('webhook_attempts')
      .selectAll()
      .where('delivery_id', '=', delivered!.delivery_id)
      .orderBy('attempt_number')
      .execute();
    expect(attempts.map((a) => [a.status_code, a.outcome])).toEqual([
      [503, 'retryable'],
      [408, 'retryable'],
      [429, 'retryable'],
      [null, 'retryable'],
      [200, 'delivered'],
    ]);
    expect(attempts[3]!.error).toMatch(/timeout/);
    // Every attempt carried the same event id and the same body.
    const mine = receiver.received.filter((r) => r.headers['paygate-event-id'] === eventId);
    expect(mine).toHaveLength(5);
    expect(new Set(mine.map((r) => r.body)).size).toBe(1);
    expect(clock.nowMs() - start).toBe(450_000);
  });

  it('fails at once on a non-retryable 4xx, and gives up on a retryable failure after 3 days', async () => {
    receiver.respond = () => 400;
    const rejected = await publish(bus, 'payment.confirmed', 'escrow-ledger', paymentData('pay_400'));
    const [failed] = await waitFor(
      async () => {
        const rows = await deliveriesOf(rejected);
        return rows[0]?.status === 'failed' ? rows : undefined;
      },
      { message: 'failed on 400' },
    );
    expect(failed).toMatchObject({ attempt_count: 1, last_status_code: 400, next_attempt_at: null });

    receiver.respond = () => 500;
    const doomed = await publish(bus, 'payment.confirmed', 'escrow-ledger', paymentData('pay_500'));
    const [first] = await waitFor(
      async () => {
        const rows = await deliveriesOf(doomed);
        return rows[0]?.attempt_count === 1 ? rows : undefined;
      },
      { message: 'first attempt' },
    );
    expect(first!.give_up_at.getTime() - first!.created_at.getTime()).toBe(72 * 3600_000);
    // Far into the schedule: delays are capped at 6 h, the last retry is clamped to the end of the window.
    clock.set(first!.give_up_at.getTime() - 60_000);
    await waitFor(async () => (await deliveriesOf(doomed))[0]?.attempt_count === 2, { message: 'attempt 2' });
    const second = (await deliveriesOf(doomed))[0]!;
    expect(second.status).toBe('pending');
    expect(second.next_attempt_at!.getTime()).toBe(first!.give_up_at.getTime());
    clock.set(first!.give_up_at.getTime());
    const [gaveUp] = await waitFor(
      async () => {
        const rows = await deliveriesOf(doomed);
        return rows[0]?.status === 'failed' ? rows : undefined;
      },
      { message: 'gave up' },
    );
    expect(gaveUp).toMatchObject({ attempt_count: 3, last_status_code: 500 });
  });

  it('keeps the retry schedule across a restart of notifier', async () => {
    receiver.respond = () => 502;
    const eventId = await publish(bus, 'refund.requested', 'escrow-ledger', {
      event: 'refund.requested',
      refundRequestId: 'rr_restart',
      transactionId: 'tx_restart',
      sellerId: SELLER_ID,
      reason: 'changed my mind',
      requestedAt: new Date().toISOString(),
    });
    const [pending] = await waitFor(
      async () => {
        const rows = await deliveriesOf(eventId);
        return rows[0]?.attempt_count === 1 ? rows : undefined;
      },
      { message: 'first attempt before restart' },
    );
    await notifier.stop();

    receiver.respond = () => 200;
    clock.set(pending!.next_attempt_at!.getTime());
    notifier = await startNotifier(configFor(), { random: () => 1 });
    const [delivered] = await waitFor(
      async () => {
        const rows = await deliveriesOf(eventId);
        return rows[0]?.status === 'delivered' ? rows : undefined;
      },
      { message: 'delivered by the new instance' },
    );
    expect(delivered!.attempt_count).toBe(2);
  });

  it('shows deliveries with their attempts to the seller and redelivers on request', async () => {
    receiver.respond = () => 500;
    const eventId = await publish(bus, 'payment.confirmed', 'escrow-ledger', paymentData('pay_api'));
    await waitFor(async () => (await deliveriesOf(eventId))[0]?.attempt_count === 1, {
      message: 'attempted',
    });

    const list = await api(`/api/v1/webhooks/deliveries?eventId=${eventId}`);
    expect(list.status).toBe(200);
    const listed = (await list.json()).data;
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({
      eventId,
      eventType: 'payment.confirmed',
      url: receiver.url,
      status: 'pending',
      attemptCount: 1,
      lastStatusCode: 500,
      attempts: [{ number: 1, statusCode: 500, outcome: 'retryable', responseExcerpt: 'status 500' }],
    });
    const deliveryId = listed[0].id;

    const one = await api(`/api/v1/webhooks/deliveries/${deliveryId}`);
    expect(one.status).toBe(200);
    expect((await one.json()).payload).toMatchObject({ id: eventId, event: 'payment.confirmed' });

    // Another seller sees nothing of it; no key is refused.
    expect((await api(`/api/v1/webhooks/deliveries/${deliveryId}`, {}, OTHER_API_KEY)).status).toBe(404);
    expect((await fetch(`${notifier.url}/api/v1/webhooks/deliveries`)).status).toBe(401);
    const bad = await api('/api/v1/webhooks/deliveries?limit=1000');
    expect(bad.status).toBe(400);
    expect((await bad.json()).error).toMatchObject({ field: 'limit' });

    receiver.respond = () => 200;
    receiver.received.length = 0;
    const redeliver = () =>
      api(`/api/v1/webhooks/deliveries/${deliveryId}/redeliver`, {
        method: 'POST',
        headers: { 'idempotency-key': 'redo-1' },
      });
    const first = await redeliver();
    expect(first.status).toBe(202);
    const created = await first.json();
    expect(created).toMatchObject({ eventId, status: 'pending', redeliveryOf: deliveryId });
    const again = await redeliver();
    expect(again.status).toBe(202);
    expect((await again.json()).id).toBe(created.id);
    const reused = await api(`/api/v1/webhooks/deliveries/${created.id}/redeliver`, {
      method: 'POST',
      headers: { 'idempotency-key': 'redo-1' },
    });
    expect(reused.status).toBe(409);
    expect((await reused.json()).error.code).toBe('idempotency_key_reused');

    await waitFor(
      async () => {
        const response = await api(`/api/v1/webhooks/deliveries/${created.id}`);
        return (await response.json()).status === 'delivered';
      },
      { message: 'redelivered' },
    );
    const redelivered = receiver.received.filter((r) => r.headers['paygate-delivery-id'] === created.id);
    expect(redelivered).toHaveLength(1);
    // Same event id and body as the original: the seller can drop it as a duplicate.
    expect(redelivered[0]!.headers['paygate-event-id']).toBe(eventId);
    expect(JSON.parse(redelivered[0]!.body).id).toBe(eventId);
    expect((await deliveriesOf(eventId)).map((d) => d.delivery_id)).toEqual([deliveryId, created.id]);
    expect((await api('/api/v1/webhooks/deliveries/nope/redeliver', { method: 'POST' })).status).toBe(404);
  });
});
