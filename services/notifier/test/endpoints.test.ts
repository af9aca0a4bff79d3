import { verifyWebhook } from '@paygate/gateway-middleware';
import { waitFor } from '@paygate/testing';
import { type NotifierHarness, startNotifierHarness } from './harness';
import {
  OTHER_SELLER_ID,
  paymentConfirmed,
  publish,
  SELLER_ID,
  sellerIdentity,
  sellerUpdated,
  WebhookReceiver,
} from './helpers';

jest.setTimeout(60_000);

const ACCOUNT_SECRET = 'whsec_account_secret_0123456789';
const API_KEY = 'sk_test_endpoint_seller_0123456789';
const OTHER_API_KEY = 'sk_test_endpoint_other_0123456789';
/** The seller's wallet sessions (shaped like the registry's tokens): what changes where events go. */
const SESSION = 'sessionAA.endpointsA.signature0123456789';
const NO_SECRET_SESSION = 'sessionBB.endpointsB.signature0123456789';

/** Whether a received webhook verifies with this secret (the seller library's check). */
const signedWith = (request: { headers: Record<string, unknown>; body: string }, secret: string) => {
  try {
    verifyWebhook({
      payload: Buffer.from(request.body),
      header: String(request.headers['paygate-signature']),
      secret,
      toleranceSeconds: 300,
    });
    return true;
  } catch {
    return false;
  }
};

const MANUAL_DELIVERIES_PER_MINUTE = 5;

describe('webhook endpoints: several per seller, each with its events and its own secret', () => {
  let h: NotifierHarness;
  const receivers = { payments: new WebhookReceiver(), all: new WebhookReceiver() };
  const api = async (method: string, path: string, body?: unknown, key = API_KEY) => {
    const response = await fetch(`${h.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  };
  /** Changes where events go: the wallet's session, as the dashboard sends it. */
  const manage = (method: string, path: string, body?: unknown) => api(method, path, body, SESSION);
  const eventsAt = (receiver: WebhookReceiver) => receiver.received.map((r) => JSON.parse(r.body).event);

  beforeAll(async () => {
    for (const receiver of Object.values(receivers)) await receiver.start();
    h = await startNotifierHarness('notifep', {
      settings: { MANUAL_DELIVERIES_PER_MINUTE: String(MANUAL_DELIVERIES_PER_MINUTE) },
      secrets: { [SELLER_ID]: { secret: ACCOUNT_SECRET, version: 1 } },
      sellers: {
        [API_KEY]: sellerIdentity(SELLER_ID),
        [OTHER_API_KEY]: sellerIdentity(OTHER_SELLER_ID),
        [SESSION]: sellerIdentity(SELLER_ID),
        [NO_SECRET_SESSION]: sellerIdentity('seller_without_secret'),
      },
    });
    // The account's single webhook URL (the registry's webhookUrl) keeps working beside the endpoints.
    await publish(h.bus, 'seller.updated', 'registry', sellerUpdated({ webhookUrl: h.receiver.url }));
    await waitFor(
      async () => (await h.db.selectFrom('sellers').selectAll().executeTakeFirst())?.webhook_url,
      {
        message: 'seller projected',
      },
    );
  });

  afterAll(async () => {
    await h?.stop();
    for (const receiver of Object.values(receivers)) await receiver.stop();
  });

  it('sends each endpoint the events it asked for, signed with its own secret, with a test event, changes and deletion', async () => {
    // Bad input is named: the field and the rule.
    const badUrl = await manage('POST', '/api/v1/webhooks/endpoints', { url: 'ftp://x', events: ['*'] });
    expect(badUrl.status).toBe(400);
    expect(badUrl.body.error.field).toBe('url');
    const noEvents = await manage('POST', '/api/v1/webhooks/endpoints', {
      url: receivers.all.url,
      events: [],
    });
    expect(noEvents.status).toBe(400);
    expect(noEvents.body.error.field).toContain('events');
    // Without an account secret to derive from: 409 naming what to do.
    const noSecret = await api(
      'POST',
      '/api/v1/webhooks/endpoints',
      { url: receivers.all.url, events: ['*'] },
      NO_SECRET_SESSION,
    );
    expect(noSecret.status).toBe(409);
    expect(noSecret.body.error.code).toBe('webhook_secret_missing');

    // The sk_ API key alone does not change where events go: the wallet's session does (as for webhookUrl).
    const withKey = await api('POST', '/api/v1/webhooks/endpoints', {
      url: receivers.all.url,
      events: ['*'],
    });
    expect(withKey.status).toBe(403);
    expect(withKey.body.error).toMatchObject({ code: 'wallet_session_required', field: 'Authorization' });

    const payments = await manage('POST', '/api/v1/webhooks/endpoints', {
      url: receivers.payments.url,
      events: ['payment.confirmed'],
      description: 'Orders',
    });
    expect(payments.status).toBe(201);
    expect(payments.body.secret).toMatch(/^whsec_/);
    expect(payments.body.endpoint).toMatchObject({
      events: ['payment.confirmed'],
      enabled: true,
      secretVersion: 1,
    });
    const all = await manage('POST', '/api/v1/webhooks/endpoints', { url: receivers.all.url, events: ['*'] });
    expect(all.status).toBe(201);
    expect(all.body.secret).not.toBe(payments.body.secret);
    expect(
      (await api('GET', '/api/v1/webhooks/endpoints')).body.data.map((e: { id: string }) => e.id),
    ).toEqual([payments.body.endpoint.id, all.body.endpoint.id]);
    // Another seller sees none of them.
    expect((await api('GET', '/api/v1/webhooks/endpoints', undefined, OTHER_API_KEY)).body.data).toEqual([]);
    expect(
      (await api('GET', `/api/v1/webhooks/endpoints/${payments.body.endpoint.id}`, undefined, OTHER_API_KEY))
        .status,
    ).toBe(404);

    // A payment goes to the account URL and both endpoints; a refund request only where all events are wanted.
    await publish(h.bus, 'payment.confirmed', 'escrow-ledger', paymentConfirmed(SELLER_ID));
    await publish(h.bus, 'refund.requested', 'escrow-ledger', {
      event: 'refund.requested',
      refundRequestId: 'rr_ep_1',
      transactionId: 'tx_ep_1',
      sellerId: SELLER_ID,
      reason: 'late',
      requestedAt: new Date().toISOString(),
    });
    await waitFor(() => receivers.all.received.length === 2, {
      message: 'both events at the catch-all endpoint',
    });
    await waitFor(() => h.receiver.received.length === 2, {
      message: 'both events at the account URL',
    });
    await waitFor(() => receivers.payments.received.length >= 1, {
      message: 'the payment at the payments endpoint',
    });
    expect(eventsAt(receivers.payments)).toEqual(['payment.confirmed']);
    expect(eventsAt(receivers.all).sort()).toEqual(['payment.confirmed', 'refund.requested']);
    // Each endpoint's deliveries are signed with its own secret, and the account URL's with the account's.
    const [toPayments] = receivers.payments.received;
    expect(signedWith(toPayments!, payments.body.secret)).toBe(true);
    expect(signedWith(toPayments!, all.body.secret)).toBe(false);
    expect(signedWith(toPayments!, ACCOUNT_SECRET)).toBe(false);
    expect(receivers.all.received.every((r) => signedWith(r, all.body.secret))).toBe(true);
    expect(h.receiver.received.every((r) => signedWith(r, ACCOUNT_SECRET))).toBe(true);

    // The log per endpoint: status, answer and the payload sent.
    const listed = await api('GET', `/api/v1/webhooks/deliveries?endpointId=${payments.body.endpoint.id}`);
    await waitFor(
      async () =>
        (await api('GET', `/api/v1/webhooks/deliveries?endpointId=${payments.body.endpoint.id}`)).body.data[0]
          ?.status === 'delivered',
      { message: 'delivery recorded as delivered' },
    );
    expect(listed.body.data).toHaveLength(1);
    const detail = await api('GET', `/api/v1/webhooks/deliveries/${listed.body.data[0].id}`);
    expect(detail.body).toMatchObject({
      endpointId: payments.body.endpoint.id,
      url: receivers.payments.url,
      status: 'delivered',
      payload: { event: 'payment.confirmed', amount: '0.25' },
      attempts: [{ number: 1, statusCode: 200, outcome: 'delivered', responseExcerpt: 'ok' }],
    });

    // "Send test event": a signed webhook.test, logged like any delivery.
    receivers.payments.respond = () => 500;
    const test = await api('POST', `/api/v1/webhooks/endpoints/${payments.body.endpoint.id}/test`);
    expect(test.status).toBe(202);
    expect(test.body).toMatchObject({ eventType: 'webhook.test', endpointId: payments.body.endpoint.id });
    await waitFor(() => receivers.payments.received.length === 2, { message: 'the test event arrived' });
    const testEvent = JSON.parse(receivers.payments.received[1]!.body);
    expect(testEvent).toMatchObject({ event: 'webhook.test', endpointId: payments.body.endpoint.id });
    expect(signedWith(receivers.payments.received[1]!, payments.body.secret)).toBe(true);
    // The receiver's answer is in the log (500 and its body excerpt).
    await waitFor(
      async () =>
        (await api('GET', `/api/v1/webhooks/deliveries/${test.body.id}`)).body.attempts.length === 1,
      { message: 'the test attempt logged' },
    );
    expect((await api('GET', `/api/v1/webhooks/deliveries/${test.body.id}`)).body.attempts[0]).toMatchObject({
      statusCode: 500,
      outcome: 'retryable',
      responseExcerpt: 'status 500',
    });
    receivers.payments.respond = () => 200;

    // Rotating one endpoint's secret: its next delivery verifies with the new secret only; the other keeps its own.
    const rotated = await manage('POST', `/api/v1/webhooks/endpoints/${all.body.endpoint.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    expect(rotated.body.endpoint.secretVersion).toBe(2);
    expect(rotated.body.secret).not.toBe(all.body.secret);
    // Nor silences an endpoint, deletes it or rotates its secret.
    for (const [method, path] of [
      ['PATCH', `/api/v1/webhooks/endpoints/${payments.body.endpoint.id}`],
      ['DELETE', `/api/v1/webhooks/endpoints/${payments.body.endpoint.id}`],
      ['POST', `/api/v1/webhooks/endpoints/${payments.body.endpoint.id}/rotate-secret`],
    ] as const) {
      const refused = await api(method, path, method === 'PATCH' ? { enabled: false } : undefined);
      expect(refused.status).toBe(403);
      expect(refused.body.error.code).toBe('wallet_session_required');
    }
    // Turned off: the payments endpoint hears nothing more.
    const off = await manage('PATCH', `/api/v1/webhooks/endpoints/${payments.body.endpoint.id}`, {
      enabled: false,
    });
    expect(off.body.enabled).toBe(false);
    const third = await publish(h.bus, 'payment.confirmed', 'escrow-ledger', paymentConfirmed(SELLER_ID));
    await waitFor(() => receivers.all.received.length === 3, {
      message: 'the next payment at the catch-all',
    });
    expect(signedWith(receivers.all.received[2]!, rotated.body.secret)).toBe(true);
    expect(signedWith(receivers.all.received[2]!, all.body.secret)).toBe(false);
    // Every delivery of an event is created in one transaction: the disabled endpoint has none of this one.
    const deliveriesOfThird = await h.db
      .selectFrom('webhook_deliveries')
      .select('endpoint_id')
      .where('event_id', '=', third)
      .execute();
    expect(deliveriesOfThird.map((d) => d.endpoint_id).sort()).toEqual([all.body.endpoint.id, null].sort());

    // Deleted: gone from the list; a redelivery of one of its deliveries is refused.
    expect((await manage('DELETE', `/api/v1/webhooks/endpoints/${all.body.endpoint.id}`)).status).toBe(204);
    expect(
      (await api('GET', '/api/v1/webhooks/endpoints')).body.data.map((e: { id: string }) => e.id),
    ).toEqual([payments.body.endpoint.id]);
    const ofDeleted = await api('GET', `/api/v1/webhooks/deliveries?endpointId=${all.body.endpoint.id}`);
    const redelivery = await api(
      'POST',
      `/api/v1/webhooks/deliveries/${ofDeleted.body.data[0].id}/redeliver`,
    );
    expect(redelivery.status).toBe(409);
    expect(redelivery.body.error.code).toBe('webhook_endpoint_deleted');
  });

  it(`answers at most ${MANUAL_DELIVERIES_PER_MINUTE} test events a minute per seller, then 429 with Retry-After`, async () => {
    const endpoint = await manage('POST', '/api/v1/webhooks/endpoints', {
      url: receivers.all.url,
      events: ['*'],
    });
    expect(endpoint.status).toBe(201);
    // Twice the limit and one more: even if the burst crosses into the next minute, one of them is refused.
    const answers: Array<{ status: number; retryAfter: string | null; code?: string }> = [];
    for (let i = 0; i < 2 * MANUAL_DELIVERIES_PER_MINUTE + 1; i++) {
      const answer = await fetch(`${h.url}/api/v1/webhooks/endpoints/${endpoint.body.endpoint.id}/test`, {
        method: 'POST',
        headers: { authorization: `Bearer ${API_KEY}` },
      });
      const body = await answer.json();
      answers.push({
        status: answer.status,
        retryAfter: answer.headers.get('retry-after'),
        code: body.error?.code,
      });
    }
    expect(answers.filter((a) => a.status === 202).length).toBeLessThanOrEqual(
      2 * MANUAL_DELIVERIES_PER_MINUTE,
    );
    const refused = answers.find((a) => a.status === 429);
    expect(refused).toMatchObject({ code: 'rate_limited', retryAfter: expect.stringMatching(/^[1-9]\d*$/) });
  });
});
