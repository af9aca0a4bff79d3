import { createHmac } from 'node:crypto';
import { isValidWebhook, signWebhook, verifyWebhook, WebhookVerificationError } from '../src/webhooks';

const secret = 'whsec_test_0123456789abcdef';
const body = JSON.stringify({
  id: '01J0000000000000000000000',
  event: 'payment.confirmed',
  data: { amount: '0.05' },
});
const t = 1_800_000_000;
const at = (seconds: number) => () => new Date(seconds * 1000);

function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error.reason;
    throw error;
  }
  return 'ok';
}

describe('webhook signatures', () => {
  it('signs t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "t.body")>, independently recomputable', () => {
    const header = signWebhook({ payload: body, secret, timestamp: t });
    const expected = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
    expect(header).toBe(`t=${t},v1=${expected}`);
  });

  it('accepts a genuine signature within the tolerance, from a string or a Buffer body', () => {
    const header = signWebhook({ payload: body, secret, timestamp: t });
    expect(verifyWebhook({ payload: body, header, secret, now: at(t + 299) })).toEqual({ timestamp: t });
    expect(verifyWebhook({ payload: Buffer.from(body), header, secret, now: at(t - 10) }).timestamp).toBe(t);
    expect(isValidWebhook({ payload: body, header, secret, now: at(t) })).toBe(true);
  });

  it('rejects a changed body, a wrong secret and a tampered timestamp', () => {
    const header = signWebhook({ payload: body, secret, timestamp: t });
    expect(reasonOf(() => verifyWebhook({ payload: `${body} `, header, secret, now: at(t) }))).toBe(
      'signature_mismatch',
    );
    expect(reasonOf(() => verifyWebhook({ payload: body, header, secret: `${secret}x`, now: at(t) }))).toBe(
      'signature_mismatch',
    );
    const moved = header.replace(`t=${t}`, `t=${t + 1}`);
    expect(reasonOf(() => verifyWebhook({ payload: body, header: moved, secret, now: at(t) }))).toBe(
      'signature_mismatch',
    );
    expect(isValidWebhook({ payload: `${body} `, header, secret, now: at(t) })).toBe(false);
  });

  it('rejects a stale or future timestamp (replay) even with a valid signature', () => {
    const header = signWebhook({ payload: body, secret, timestamp: t });
    expect(reasonOf(() => verifyWebhook({ payload: body, header, secret, now: at(t + 301) }))).toBe(
      'timestamp_outside_tolerance',
    );
    expect(reasonOf(() => verifyWebhook({ payload: body, header, secret, now: at(t - 301) }))).toBe(
      'timestamp_outside_tolerance',
    );
    expect(
      verifyWebhook({ payload: body, header, secret, now: at(t + 3000), toleranceSeconds: 3600 }),
    ).toEqual({
      timestamp: t,
    });
  });

  it('rejects missing and malformed headers', () => {
    expect(reasonOf(() => verifyWebhook({ payload: body, header: undefined, secret }))).toBe(
      'missing_header',
    );
    expect(reasonOf(() => verifyWebhook({ payload: body, header: '', secret }))).toBe('missing_header');
    for (const header of [
      'v1=abc',
      `t=${t}`,
      `t=abc,v1=${'a'.repeat(64)}`,
      `t=${t},v1=zz`,
      'x'.repeat(3000),
    ]) {
      expect(reasonOf(() => verifyWebhook({ payload: body, header, secret, now: at(t) }))).toBe(
        'malformed_header',
      );
    }
  });

  it('accepts the header when any of several v1 signatures matches (secret rotation)', () => {
    const good = signWebhook({ payload: body, secret, timestamp: t }).split('v1=')[1];
    const header = `t=${t},v1=${'0'.repeat(64)},v1=${good}`;
    expect(verifyWebhook({ payload: body, header, secret, now: at(t) }).timestamp).toBe(t);
  });
});
