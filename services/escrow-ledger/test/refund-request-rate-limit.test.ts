/**
 * Buyers' refund requests are unauthenticated (a wallet signature decides): each is counted per client address
 * before any work; over the limit a 429 with Retry-After and the shared error body.
 *
 *   npx jest --ci services/escrow-ledger/test/refund-request-rate-limit.test.ts
 */
import { type LedgerHarness, startLedgerHarness } from './helpers';

jest.setTimeout(30_000);

const PER_MINUTE = 3;

describe('escrow-ledger: refund requests per client address', () => {
  let h: LedgerHarness;

  beforeAll(async () => {
    h = await startLedgerHarness('ledgerrrq', { REFUND_REQUESTS_PER_MINUTE: String(PER_MINUTE) });
  });
  afterAll(async () => {
    await h?.stop();
  });

  it(`answers at most ${PER_MINUTE} refund requests a minute per client, then 429 with Retry-After`, async () => {
    const request = {
      transactionId: 'txn_01KAQ3T0000X7Q0E4W9T6B2M8C',
      reason: 'never arrived',
      signature: `0x${'ab'.repeat(65)}`,
    };
    for (let i = 0; i < PER_MINUTE; i++) {
      const answer = await h.http('/api/v1/refund-requests', { body: request, key: null });
      expect(answer.status).toBeGreaterThanOrEqual(400);
      expect(answer.status).not.toBe(429);
    }
    const over = await h.http('/api/v1/refund-requests', { body: request, key: null });
    expect(over.status).toBe(429);
    const retryAfter = Number(over.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(over.body.error).toMatchObject({
      code: 'rate_limited',
      limit: PER_MINUTE,
      message: expect.stringContaining(`at most ${PER_MINUTE} refund requests per minute per client address`),
      requestId: expect.any(String),
    });
    // Reading a request's status is not limited.
    expect((await h.http('/api/v1/refund-requests/rrq_unknown', { key: null })).status).not.toBe(429);
  });
});
