import { callOutcomeDetail, callOutcomeLabel } from '../src/app/transactions';
import type { Transaction } from '../src/app/types';

/** A payment's paid call as the ledger reports it (GET /api/v1/transactions' call fields). */
const failedCall = (overrides: Partial<Transaction> = {}): Partial<Transaction> => ({
  callStatus: 'failed_retryable',
  callFailedAt: '2026-11-26T13:55:00.000Z',
  upstreamOutcome: 'error_status',
  upstreamStatus: 502,
  retryUntil: '2026-11-26T14:05:00.000Z',
  callRecoveredAt: null,
  ...overrides,
});
const at = (iso: string) => new Date(iso);

describe('dashboard: a payment whose seller failed the call', () => {
  it('says the buyer may retry until the window ends (its time in UTC, with the date on another day)', () => {
    expect(callOutcomeLabel(failedCall(), at('2026-11-26T14:00:00Z'))).toBe(
      'Seller failed, buyer may retry until 14:05 UTC',
    );
    expect(
      callOutcomeLabel(failedCall({ retryUntil: '2026-11-27T00:04:00.000Z' }), at('2026-11-26T23:59:00Z')),
    ).toBe('Seller failed, buyer may retry until 2026-11-27 00:04 UTC');
  });

  it('says "not served: refunded" after the window, even when the page read it while the window was open', () => {
    expect(callOutcomeLabel(failedCall({ callStatus: 'failed' }), at('2026-11-26T14:10:00Z'))).toBe(
      'Seller failed, not served: refunded to the buyer',
    );
    expect(callOutcomeLabel(failedCall(), at('2026-11-26T14:05:00Z'))).toBe(
      'Seller failed, not served: refunded to the buyer',
    );
  });

  it('a retry served: said so; a call served at once (or an older API without the fields): no label', () => {
    const recovered = failedCall({ callStatus: 'served', callRecoveredAt: '2026-11-26T13:58:00.000Z' });
    expect(callOutcomeLabel(recovered, at('2026-11-26T14:00:00Z'))).toBe('Seller failed, served on retry');
    expect(callOutcomeLabel({ callStatus: 'served', callFailedAt: null }, new Date())).toBeUndefined();
    expect(callOutcomeLabel({}, new Date())).toBeUndefined();
  });

  it('the detail view says how and when the seller failed and what became of the window', () => {
    const now = at('2026-11-26T14:00:00Z');
    expect(callOutcomeDetail(failedCall(), now)).toBe(
      'Your API HTTP 502 at 2026-11-26 13:55 UTC; the buyer may call again with the same payment until 2026-11-26 14:05 UTC.',
    );
    expect(
      callOutcomeDetail(
        failedCall({ callStatus: 'failed', upstreamOutcome: 'timeout', upstreamStatus: null }),
        at('2026-11-26T15:00:00Z'),
      ),
    ).toBe(
      'Your API timed out at 2026-11-26 13:55 UTC; no retry was served before the window closed at 2026-11-26 14:05 UTC, so the payment is refunded to the buyer from escrow.',
    );
    expect(
      callOutcomeDetail(
        failedCall({ callStatus: 'served', callRecoveredAt: '2026-11-26T13:58:00.000Z' }),
        now,
      ),
    ).toBe(
      "Your API HTTP 502 at 2026-11-26 13:55 UTC; the buyer's retry was served at 2026-11-26 13:58 UTC.",
    );
    expect(callOutcomeDetail({ callStatus: 'served', callFailedAt: null }, now)).toBeUndefined();
  });
});
