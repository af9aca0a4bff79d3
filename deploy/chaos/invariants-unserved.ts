/**
 * Charged means served or refunded (invariant 12): every pay-per-call the gateway claimed is served or, its seller
 * having failed it and its retry window closed unserved, refunded by the ledger; never both, never neither.
 */
import type { InvariantInputs, InvariantReading } from './invariant-check';

/** The gateway closes a window 5 s after it (replicas' clocks), within a 2 s pass: past this it must be closed. */
const CLOSE_WITHIN_MS = 30_000;

/** Invariant 12: every paid call served or refunded, never both, never neither. */
export async function everyPaidCallIsServedOrRefunded({
  client,
}: InvariantInputs): Promise<InvariantReading> {
  const problems: string[] = [];
  const calls = await client.query(
    `select c.id, c.tx_hash, c.state, c.retry_until < now() - ($1 || ' milliseconds')::interval as overdue,
            u.status as decided, u.decision
       from gateway.payment_claims c
       left join ledger.unserved_calls u on u.payment_id = c.id
      where c.kind <> 'subscription' and c.claimed_via = 'proxy'`,
    [String(CLOSE_WITHIN_MS)],
  );
  for (const call of calls.rows) {
    if (call.state === 'served' && call.decided === 'refunded') {
      problems.push(`${call.tx_hash} served and refunded`);
    } else if (call.state === 'retryable' && call.overdue) {
      problems.push(`${call.tx_hash} retryable past its window: never closed, neither served nor refunded`);
    } else if (
      call.state === 'unserved' &&
      call.decided !== 'refunded' &&
      call.decision !== 'no_seller_failure'
    ) {
      // A buyer's own body failing (no seller failure) is not the seller's: closed, not refunded.
      problems.push(
        `${call.tx_hash} closed unserved but ${call.decided ?? 'unknown to the ledger'} (${call.decision})`,
      );
    }
  }
  const served = calls.rows.filter((c) => c.state === 'served').length;
  const refunded = calls.rows.filter((c) => c.decided === 'refunded').length;
  return {
    name: `every paid call served (${served}) or refunded (${refunded}), never both, never neither`,
    checked: calls.rows.length,
    problems,
  };
}
