/** How a transfer's amount settles a session (checkout's matching rule) and the payment the ledger books for it. */
import type { SessionRow } from '../src/db';
import { outcomeFor, sessionPaymentOf } from '../src/matching/session-payments';

const EXPIRES = new Date('2026-06-01T12:15:00Z');
// Price 5 USDC plus a suffix of 1234 micro-USDC: the unique amount this session is paid by.
const session = {
  session_id: 'cs_1',
  seller_id: 'seller-1',
  skill_id: 'skill-1',
  skill_name: 'weather',
  endpoint_id: null,
  exact_amount_micro: 5_001_234n,
  expires_at: EXPIRES,
  hold_period_hours: 24,
} as SessionRow;
const before = new Date(EXPIRES.getTime() - 1);

describe('outcomeFor', () => {
  it('is paid for the exact amount before the expiry, paid_late at or after it', () => {
    expect(outcomeFor(session, 5_001_234n, before)).toBe('paid');
    expect(outcomeFor(session, 5_001_234n, EXPIRES)).toBe('paid_late');
    expect(outcomeFor(session, 5_001_234n, new Date(EXPIRES.getTime() + 3_600_000))).toBe('paid_late');
  });

  it('is underpaid a micro-USDC short and overpaid a micro-USDC over, whatever the time', () => {
    for (const now of [before, EXPIRES]) {
      expect(outcomeFor(session, 5_001_233n, now)).toBe('underpaid');
      expect(outcomeFor(session, 5_001_235n, now)).toBe('overpaid');
    }
    // The price without its suffix is short too: the suffix is what tells sessions of one price apart.
    expect(outcomeFor(session, 5_000_000n, before)).toBe('underpaid');
  });
});

describe('sessionPaymentOf', () => {
  const transfer = { network: 'local', token_address: `0x${'cc'.repeat(20)}` };

  it('books no payment for an underpaid session', () => {
    expect(sessionPaymentOf(session, transfer, 'underpaid')).toBeUndefined();
  });

  it.each(['paid', 'paid_late', 'overpaid'] as const)(
    'books a checkout payment of the session when %s',
    (outcome) => {
      const payment = sessionPaymentOf(session, transfer, outcome);
      expect(payment).toEqual({
        paymentId: expect.stringMatching(/^pay_[0-9a-f]{24}$/),
        source: 'checkout',
        sellerId: 'seller-1',
        skillId: 'skill-1',
        skillName: 'weather',
        endpointId: null,
        sessionId: 'cs_1',
        network: 'local',
        token: transfer.token_address,
        holdPeriodHours: 24,
      });
    },
  );

  it('gives a fresh payment id each time (the ledger answers a repeated claim with the first one)', () => {
    const first = sessionPaymentOf(session, transfer, 'paid')!;
    const second = sessionPaymentOf(session, transfer, 'paid')!;
    expect(first.paymentId).not.toBe(second.paymentId);
  });
});
