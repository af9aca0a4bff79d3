import fc from 'fast-check';
import { outcomeOf, SERVED_AT_ONCE } from '../src/views/call-outcomes';

/** A payment's paid-call attempts as the gateway reports them, and the callStatus a seller reads. */

const T0 = Date.parse('2026-11-22T10:00:00Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000);

function attempt(n: number, outcome: 'failed' | 'served', seconds: number, retryForSeconds = 60) {
  return {
    payment_id: 'pay_unit',
    attempt: n,
    outcome,
    upstream_outcome: outcome === 'failed' ? ('error_status' as const) : null,
    upstream_status: outcome === 'failed' ? 502 : null,
    at: at(seconds),
    retry_until: outcome === 'failed' ? at(seconds + retryForSeconds) : null,
  };
}

describe("a paid call's outcome", () => {
  it('is served at once without a failure', () => {
    expect(outcomeOf([attempt(1, 'served', 0)], at(1))).toBe(SERVED_AT_ONCE);
  });

  it('a failure is retryable inside its window and failed from its end on', () => {
    const failed = [attempt(1, 'failed', 0, 60)];
    expect(outcomeOf(failed, at(59))).toEqual({
      callStatus: 'failed_retryable',
      callFailedAt: at(0).toISOString(),
      upstreamOutcome: 'error_status',
      upstreamStatus: 502,
      retryUntil: at(60).toISOString(),
      callRecoveredAt: null,
    });
    expect(outcomeOf(failed, at(60)).callStatus).toBe('failed');
  });

  it('a retry served after a failure is served, recovered at its time, the failure still told', () => {
    expect(outcomeOf([attempt(1, 'failed', 0), attempt(2, 'served', 20)], at(500))).toMatchObject({
      callStatus: 'served',
      callFailedAt: at(0).toISOString(),
      callRecoveredAt: at(20).toISOString(),
    });
  });

  it('the highest attempt decides and the latest failure says how the seller failed', () => {
    const attempts = [attempt(1, 'failed', 0, 30), attempt(2, 'served', 10), attempt(3, 'failed', 40, 30)];
    expect(outcomeOf(attempts, at(50))).toMatchObject({
      callStatus: 'failed_retryable',
      callFailedAt: at(40).toISOString(),
      retryUntil: at(70).toISOString(),
      callRecoveredAt: null,
    });
  });

  it('for any attempts: served iff the last one served, retryable only before the latest failure window ends', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ served: fc.boolean(), seconds: fc.nat(600), window: fc.integer({ min: 1, max: 600 }) }),
          {
            minLength: 1,
            maxLength: 8,
          },
        ),
        fc.nat(1800),
        (steps, nowSeconds) => {
          const attempts = steps.map((s, i) =>
            attempt(i + 1, s.served ? 'served' : 'failed', s.seconds, s.window),
          );
          const view = outcomeOf(attempts, at(nowSeconds));
          const last = attempts[attempts.length - 1]!;
          const failure = attempts.filter((a) => a.outcome === 'failed').pop();
          if (!failure) return expect(view).toBe(SERVED_AT_ONCE);
          expect(view.callStatus === 'served').toBe(last.outcome === 'served');
          if (view.callStatus !== 'served') {
            expect(view.callStatus === 'failed_retryable').toBe(at(nowSeconds) < failure.retry_until!);
          }
          expect(view.retryUntil).toBe(failure.retry_until!.toISOString());
        },
      ),
      { numRuns: 300 },
    );
  });
});
