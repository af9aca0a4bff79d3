/**
 * Charged means served or refunded (invariant 12): every pay-per-call the gateway claimed is served or, its seller
 * having failed it and its retry window closed unserved, refunded by the ledger; never both, never neither. Each
 * refund reached its payer on the final chain, in one batch transfer of exactly its batch's sum, and gave back all
 * of the payment, once; and every call the load saw its seller fail (failing-calls.ts) is one of them, charged once.
 */
import type { InvariantInputs, InvariantReading } from './invariant-check';
import { TRANSFER_TOPIC, topicOf } from './invariant-check';
import { RETRY_WINDOW_SECONDS } from './service-env';

/** The gateway closes a window 5 s after it (replicas' clocks), within a 2 s pass: past this it must be closed. */
const CLOSE_WITHIN_MS = 30_000;
/**
 * An attempt older than this is not coming back (the gateway's stale bound is twice the upstream timeout plus 5 s:
 * 13 s in the run): its replica died between forwarding the call and booking the answer.
 */
const IN_FLIGHT_STALE_MS = 60_000;

interface ClaimRow {
  id: string;
  tx_hash: string;
  state: 'in_flight' | 'served' | 'retryable' | 'unserved';
  overdue: boolean;
  stale: boolean;
  decided: string | null;
  decision: string | null;
  payer: string | null;
  unserved_amount: string | null;
  batch_id: string | null;
  amount: string | null;
  refunded: string | null;
  completed_refunds: string | null;
  open_refunds: number | null;
}

/** Invariant 12: every paid call served or refunded, never both, never neither. */
export async function everyPaidCallIsServedOrRefunded(run: InvariantInputs): Promise<InvariantReading> {
  const { client } = run;
  const problems: string[] = [];
  const calls = await client.query<ClaimRow>(
    `select c.id, c.tx_hash, c.state,
            c.retry_until < now() - ($1 || ' milliseconds')::interval as overdue,
            c.updated_at < now() - ($2 || ' milliseconds')::interval as stale,
            u.status as decided, u.decision, u.payer, u.amount_micro::text as unserved_amount, u.batch_id,
            t.amount_micro::text as amount, t.refunded_micro::text as refunded,
            (select coalesce(sum(r.amount_micro), 0) from ledger.refunds r
              where r.transaction_id = t.id and r.status = 'completed')::text as completed_refunds,
            (select count(*) from ledger.refunds r
              where r.transaction_id = t.id and r.status <> 'completed')::int as open_refunds
       from gateway.payment_claims c
       left join ledger.unserved_calls u on u.payment_id = c.id
       left join ledger.transactions t on t.payment_id = c.id and t.escrow_status <> 'reversed'
      where c.kind <> 'subscription' and c.claimed_via = 'proxy'`,
    [String(CLOSE_WITHIN_MS), String(IN_FLIGHT_STALE_MS)],
  );
  for (const call of calls.rows) {
    if (call.state === 'served' && call.decided === 'refunded') {
      problems.push(`${call.tx_hash} served and refunded`);
    } else if (call.state === 'retryable' && call.overdue) {
      problems.push(`${call.tx_hash} retryable past its window: never closed, neither served nor refunded`);
    } else if (call.state === 'in_flight' && call.stale) {
      // A replica that died mid-call leaves it in flight; a surviving one closes it after its window and the
      // attempt's bounds (docs/api.md, unserved calls), long before this.
      problems.push(
        `${call.tx_hash} in flight past its window and any attempt's bounds: neither served nor refunded`,
      );
    } else if (call.state === 'unserved') {
      problems.push(...unservedCallProblems(call));
    }
  }
  problems.push(...(await batchProblems(run)));
  const byTx = new Map(calls.rows.map((c) => [c.tx_hash.toLowerCase(), c]));
  const failing = run.record.failing;
  for (const call of failing) {
    const claim = byTx.get(call.txHash);
    const where = `${call.channel} ${call.failure} ${call.txHash}`;
    if (call.secondTxHash) problems.push(`${where}: presented again, charged again by ${call.secondTxHash}`);
    if (run.record.served.has(call.txHash)) problems.push(`${where}: the load saw it served`);
    if (!claim) {
      problems.push(`${where}: its seller failed it, but no paid call of the gateway names it`);
    } else if (claim.state === 'unserved' && claim.decided === 'refunded' && claim.payer !== call.payer) {
      problems.push(`${where}: refunded to ${claim.payer}, not to its payer ${call.payer}`);
    } else if (claim.state !== 'unserved') {
      problems.push(`${where}: its seller failed it, but the gateway has it ${claim.state}`);
    }
  }
  const served = calls.rows.filter((c) => c.state === 'served').length;
  const refunded = calls.rows.filter((c) => c.decided === 'refunded').length;
  const byChannel = (channel: string) => failing.filter((c) => c.channel === channel).length;
  return {
    name:
      `every paid call served (${served}) or refunded (${refunded}) once, on chain, never both, never neither; ` +
      `the load's failing calls (${failing.length}: x402 ${byChannel('x402')}, MCP ${byChannel('mcp')}, ` +
      `tx hash ${byChannel('txHash')}) each refunded to its payer`,
    checked: calls.rows.length + failing.length,
    problems,
  };
}

/** A call closed unserved: refunded in full (by the ledger, or by its seller first), or its buyer's own failure. */
function unservedCallProblems(call: ClaimRow): string[] {
  // A buyer's own body failing (no seller failure) is not the seller's: closed, not refunded.
  if (call.decision === 'no_seller_failure') return [];
  const wholeBack =
    call.amount !== null &&
    call.refunded === call.amount &&
    call.completed_refunds === call.amount &&
    call.open_refunds === 0;
  if (call.decided === 'refunded') {
    if (!call.batch_id) return [`${call.tx_hash} refunded but in no payer's batch (owed)`];
    if (!wholeBack)
      return [
        `${call.tx_hash} refunded, but ${call.completed_refunds} of ${call.amount} came back (refunded_micro ${call.refunded}, ${call.open_refunds} refund(s) open)`,
      ];
    return [];
  }
  // Its seller refunded it in full before the window closed: back once, by the seller's refund.
  if (call.decided === 'not_refundable' && call.decision === 'already_refunded' && wholeBack) return [];
  return [
    `${call.tx_hash} closed unserved but ${call.decided ?? 'unknown to the ledger'} (${call.decision})`,
  ];
}

/**
 * Every payer's batch of unserved refunds: its sum is its calls' refunds, it completed once, and its transfer on the
 * final chain moved exactly that sum from the escrow to the payer; each call it carries is completed with it.
 */
async function batchProblems(run: InvariantInputs): Promise<string[]> {
  const problems: string[] = [];
  const batches = await run.client.query<{
    id: string;
    payer: string;
    amount: string;
    status: string;
    refund_tx_hash: string | null;
    members: string;
    members_sum: string;
    members_open: number;
  }>(
    `select b.id, b.payer, b.amount_micro::text as amount, b.status, b.refund_tx_hash,
            count(u.payment_id)::text as members, coalesce(sum(u.amount_micro), 0)::text as members_sum,
            count(*) filter (where m.status <> 'completed')::int as members_open
       from ledger.refunds b
       left join ledger.unserved_calls u on u.batch_id = b.id
       left join ledger.refunds m on m.id = u.refund_id
      where b.kind = 'unserved_batch'
      group by b.id`,
  );
  const escrow = topicOf(run.escrowAddress);
  for (const batch of batches.rows) {
    const what = `batch ${batch.id} (${batch.members} call(s) to ${batch.payer})`;
    if (batch.amount !== batch.members_sum) {
      problems.push(`${what}: ${batch.amount} sent for calls refunded ${batch.members_sum}`);
    }
    if (batch.status !== 'completed' || !batch.refund_tx_hash) {
      problems.push(`${what}: ${batch.status}, not sent`);
      continue;
    }
    if (batch.members_open > 0)
      problems.push(`${what}: ${batch.members_open} of its calls' refunds not completed`);
    const receipt = await run.chain.getTransactionReceipt(batch.refund_tx_hash);
    const transfers = (receipt?.status === 1 ? receipt.logs : []).filter(
      (l) =>
        l.address.toLowerCase() === run.usdcAddress.toLowerCase() &&
        l.topics[0] === TRANSFER_TOPIC &&
        l.topics[1]?.toLowerCase() === escrow &&
        l.topics[2]?.toLowerCase() === topicOf(batch.payer),
    );
    const sent = transfers.reduce((sum, l) => sum + BigInt(l.data), 0n);
    if (transfers.length !== 1 || sent !== BigInt(batch.amount)) {
      problems.push(
        `${what}: ${transfers.length} transfer(s) of ${sent} from the escrow to the payer on the final chain in ${batch.refund_tx_hash}, not one of ${batch.amount}`,
      );
    }
  }
  return problems;
}

/** What came back of the unserved calls, for the report: refunds, batches, and how long a buyer waited. */
export interface UnservedRefundSummary {
  refundedCalls: number;
  batches: number;
  /** Calls per batch: the threshold's batching (a payer's first two calls at the run's 0.02) or the age's. */
  callsPerBatch: Record<string, number>;
  /** ms from the call's first failure (its window's start) until its refund was completed on chain. */
  waitMs: { p50: number | null; p99: number | null; max: number | null };
  notRefunded: Record<string, number>;
}

export async function unservedRefundSummary(
  client: InvariantInputs['client'],
): Promise<UnservedRefundSummary> {
  const calls = await client.query<{ status: string; decision: string | null; n: number }>(
    `select status, decision, count(*)::int as n from ledger.unserved_calls group by status, decision`,
  );
  const batches = await client.query<{ members: number; n: number }>(
    `select members, count(*)::int as n from (
        select b.id, count(u.payment_id)::int as members from ledger.refunds b
          join ledger.unserved_calls u on u.batch_id = b.id where b.kind = 'unserved_batch' group by b.id) x
      group by members order by members`,
  );
  const waits = await client.query<UnservedRefundSummary['waitMs']>(
    `select percentile_disc(0.5) within group (order by w)::int as p50,
            percentile_disc(0.99) within group (order by w)::int as p99, max(w)::int as max from (
        select extract(epoch from (b.completed_at - u.retry_until)) * 1000 + $1 as w
          from ledger.unserved_calls u join ledger.refunds b on b.id = u.batch_id
         where b.status = 'completed') x`,
    [RETRY_WINDOW_SECONDS * 1000],
  );
  return {
    refundedCalls: calls.rows.filter((r) => r.status === 'refunded').reduce((s, r) => s + r.n, 0),
    batches: batches.rows.reduce((s, r) => s + r.n, 0),
    callsPerBatch: Object.fromEntries(batches.rows.map((r) => [String(r.members), r.n])),
    waitMs: waits.rows[0] ?? { p50: null, p99: null, max: null },
    notRefunded: Object.fromEntries(
      calls.rows
        .filter((r) => r.status !== 'refunded')
        .map((r) => [`${r.status} ${r.decision ?? ''}`.trim(), r.n]),
    ),
  };
}
