/**
 * The notifier's pure webhook rules: which answers are retried, the retry schedule its defaults give, the endpoint
 * secret's derivation and the signature a seller verifies, and the body built from a bus event.
 */
import { backoffCeilingMs, backoffDelayMs } from '@paygate/bus';
import { signWebhook, verifyWebhook, WebhookVerificationError } from '@paygate/gateway-middleware';
import { eventOf } from '@paygate/testing/events';
import { loadConfig } from '../src/config';
import { endpointSecret } from '../src/webhooks/endpoint-secret';
import { buildWebhookBody } from '../src/webhooks/payload';
import { classifyStatus, MAX_WEBHOOK_ATTEMPTS } from '../src/webhooks/schedule';

describe('classifyStatus', () => {
  it.each([200, 201, 204, 299])('%i is delivered', (status) => {
    expect(classifyStatus(status)).toBe('delivered');
  });
  it.each([408, 429, 500, 502, 503, 599])('%i is retried', (status) => {
    expect(classifyStatus(status)).toBe('retryable');
  });
  // Redirects are not followed (an endpoint is one URL), and other 4xx will not change on a retry.
  it.each([199, 301, 302, 400, 401, 403, 404, 410, 422])('%i is final', (status) => {
    expect(classifyStatus(status)).toBe('permanent');
  });
});

describe('the retry schedule of the defaults', () => {
  const config = loadConfig({});
  const policy = {
    baseMs: config.webhookRetryBaseDelayMs,
    maxMs: config.webhookRetryMaxDelayMs,
    maxAttempts: MAX_WEBHOOK_ATTEMPTS,
  };

  it('starts at 30 s, doubles, and stops doubling at 6 h', () => {
    expect(backoffCeilingMs(1, policy)).toBe(30_000);
    expect(backoffCeilingMs(2, policy)).toBe(60_000);
    expect(backoffCeilingMs(3, policy)).toBe(120_000);
    expect(backoffCeilingMs(10, policy)).toBe(15_360_000);
    expect(backoffCeilingMs(11, policy)).toBe(6 * 3_600_000);
    expect(backoffCeilingMs(MAX_WEBHOOK_ATTEMPTS - 1, policy)).toBe(6 * 3_600_000);
  });

  it('draws each delay uniformly under its ceiling (full jitter)', () => {
    expect(backoffDelayMs(3, policy, () => 0)).toBe(0);
    expect(backoffDelayMs(3, policy, () => 0.5)).toBe(60_000);
    expect(backoffDelayMs(3, policy, () => 1)).toBe(120_000);
  });

  it('gives up at the attempt bound', () => {
    expect(backoffDelayMs(MAX_WEBHOOK_ATTEMPTS - 1, policy, () => 1)).toBe(6 * 3_600_000);
    expect(backoffDelayMs(MAX_WEBHOOK_ATTEMPTS, policy, () => 1)).toBeUndefined();
  });

  it('holds at least a dozen attempts in the retry window on the slowest draws, fewer than the bound', () => {
    // With every draw at its ceiling, the window ends a delivery before MAX_WEBHOOK_ATTEMPTS does.
    const windowMs = config.webhookRetryWindowHours * 3_600_000;
    let elapsedMs = 0;
    let attempts = 1;
    while (attempts < MAX_WEBHOOK_ATTEMPTS) {
      const delay = backoffDelayMs(attempts, policy, () => 1)!;
      if (elapsedMs + delay > windowMs) break;
      elapsedMs += delay;
      attempts++;
    }
    expect(attempts).toBeGreaterThanOrEqual(12);
    expect(attempts).toBeLessThan(MAX_WEBHOOK_ATTEMPTS);
  });
});

describe('endpointSecret', () => {
  const account = 'whsec_account_secret';

  it('is the same for the same account, endpoint and version', () => {
    expect(endpointSecret(account, 'ep_1', 1)).toBe(endpointSecret(account, 'ep_1', 1));
    expect(endpointSecret(account, 'ep_1', 1)).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
  });

  it('differs by endpoint, by version and by account secret', () => {
    const base = endpointSecret(account, 'ep_1', 1);
    expect(endpointSecret(account, 'ep_2', 1)).not.toBe(base);
    expect(endpointSecret(account, 'ep_1', 2)).not.toBe(base);
    expect(endpointSecret('whsec_other', 'ep_1', 1)).not.toBe(base);
  });

  it('signs what a seller verifies with it, and nothing signed with another endpoint’s', () => {
    const body = '{"id":"evt_1","event":"payment.confirmed"}';
    const secret = endpointSecret(account, 'ep_1', 1);
    const now = () => new Date(1_800_000_000_000);
    const header = signWebhook({ payload: body, secret, timestamp: 1_800_000_000 });
    expect(verifyWebhook({ payload: body, header, secret, now })).toEqual({ timestamp: 1_800_000_000 });
    expect(() =>
      verifyWebhook({ payload: body, header, secret: endpointSecret(account, 'ep_1', 2), now }),
    ).toThrow(WebhookVerificationError);
    expect(() => verifyWebhook({ payload: `${body} `, header, secret, now })).toThrow(
      WebhookVerificationError,
    );
  });
});

describe('buildWebhookBody', () => {
  it('puts the payload at the top level and again in data, event first', () => {
    const event = eventOf('payment.confirmed', { amount: '0.05', sellerId: 'seller-1' });
    const body = JSON.parse(buildWebhookBody(event));
    expect(Object.keys(body).slice(0, 3)).toEqual(['id', 'event', 'createdAt']);
    expect(body).toMatchObject({
      id: event.id,
      event: 'payment.confirmed',
      createdAt: event.occurredAt,
      amount: '0.05',
      sellerId: 'seller-1',
    });
    expect(Object.keys(body.data)[0]).toBe('event');
    expect(body.data).toEqual({ event: 'payment.confirmed', ...event.data });
  });

  it('keeps a payload field named like an envelope field only in data', () => {
    const event = eventOf('checkout.session_created', { createdAt: '2026-03-03T03:03:03.000Z' });
    const body = JSON.parse(buildWebhookBody(event));
    expect(body.createdAt).toBe(event.occurredAt);
    expect(body.data.createdAt).toBe('2026-03-03T03:03:03.000Z');
  });
});
