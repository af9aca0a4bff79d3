/**
 * What the load was told and what the system then owes (invariants 4, 5, 6, 9 and 9b): every served paid call booked
 * once, every settlement paid out once on the final chain, every refund sent once, every mined checkout payment
 * shown paid to a widget that asks again, and checkout's sessions in their seller's matching mode, both modes paid.
 */
import { getSession } from '@paygate/checkout-widget/api';
import { type InvariantInputs, type InvariantReading, TRANSFER_TOPIC, topicOf } from './invariant-check';
import type { LoadRecord } from './load';

/** Invariant 4: every served paid call has exactly one ledger payment for its transfer; none served twice. */
export async function everyServedCallHasOneLedgerPayment(run: InvariantInputs): Promise<InvariantReading> {
  const problems: string[] = [];
  // Live payments only: a payment reversed when its transaction left the chain and booked again when the same
  // transaction was mined again is one sale (its reversed transaction stays as history).
  const payments = await run.client.query(
    `select tx_hash, count(*) filter (where escrow_status <> 'reversed')::int as live
       from ledger.transactions group by tx_hash`,
  );
  const paymentsByTx = new Map(payments.rows.map((r) => [r.tx_hash, r]));
  for (const [txHash, served] of run.record.served) {
    if (served.count !== 1) problems.push(`${txHash} served ${served.count} times`);
    const live = paymentsByTx.get(txHash.toLowerCase())?.live ?? 0;
    // Mined on the final chain: exactly one live payment. Reorged out since: none (reversed).
    const receipt = await run.chain.getTransactionReceipt(txHash);
    if (receipt?.status === 1) {
      if (live === 0) problems.push(`${txHash} served, on chain, no ledger payment`);
      else if (live !== 1) problems.push(`${txHash} has ${live} ledger payments`);
    } else if (live > 0) {
      problems.push(`${txHash} served, not on chain, but ${live} ledger payment(s) not reversed`);
    }
  }
  return {
    name: 'every served call has exactly one ledger payment, no transfer served twice',
    checked: run.record.served.size,
    problems,
  };
}

/** Invariant 5: every completed settlement has exactly one confirmed payout of its amount, mined on the final chain. */
export async function everySettlementHasOneMinedPayout(run: InvariantInputs): Promise<InvariantReading> {
  const settlements = await run.client.query(
    `select s.settlement_id, s.amount_micro::text as amount, s.payout_address, s.status, o.tx_hash, o.status as transfer_status,
            o.amount_micro::text as transfer_amount, coalesce(s.failure_reason, o.last_error) as reason
       from settlement.settlements s left join settlement.outgoing_transfers o on o.transfer_id = s.transfer_id
      where s.status in ('completed', 'sending', 'pending', 'failed')`,
  );
  const problems: string[] = [];
  for (const s of settlements.rows) {
    if (s.status !== 'completed') {
      // Why, for the post-mortem: the replica logs keep only their last lines.
      problems.push(`${s.settlement_id} ${s.status}${s.reason ? `: ${String(s.reason).slice(0, 160)}` : ''}`);
      continue;
    }
    if (s.transfer_status !== 'confirmed' || s.transfer_amount !== s.amount) {
      problems.push(`${s.settlement_id} transfer ${s.transfer_status} ${s.transfer_amount}`);
      continue;
    }
    const receipt = await run.chain.getTransactionReceipt(s.tx_hash);
    const paid = receipt?.logs.some(
      (l) =>
        l.topics[0] === TRANSFER_TOPIC &&
        l.topics[2]?.toLowerCase() === topicOf(s.payout_address) &&
        BigInt(l.data) === BigInt(s.amount),
    );
    if (receipt?.status !== 1 || !paid)
      problems.push(`${s.settlement_id} payout ${s.tx_hash} not mined on the final chain`);
  }
  return {
    name: 'every settlement has exactly one mined payout of its amount',
    checked: settlements.rowCount ?? 0,
    problems,
  };
}

/** Invariant 6: every refund has exactly one mined refund transfer (ledger refund completed ⇔ settlement refund confirmed). */
export async function everyRefundHasOneMinedTransfer(run: InvariantInputs): Promise<InvariantReading> {
  const refunds = await run.client.query(
    `select l.id, l.status, l.amount_micro::text as amount, l.refund_tx_hash from ledger.refunds l`,
  );
  const problems: string[] = [];
  for (const r of refunds.rows) {
    if (r.status !== 'completed') {
      problems.push(`${r.id} ${r.status}`);
      continue;
    }
    const receipt = await run.chain.getTransactionReceipt(r.refund_tx_hash);
    if (receipt?.status !== 1)
      problems.push(`${r.id} refund ${r.refund_tx_hash} not mined on the final chain`);
  }
  const twice = await run.client.query(
    `select transaction_id, count(*)::int as n from settlement.refunds group by refund_id, transaction_id having count(*) > 1`,
  );
  for (const r of twice.rows) problems.push(`refund of ${r.transaction_id} sent ${r.n} times`);
  return {
    name: 'every refund has exactly one mined refund transfer',
    checked: refunds.rowCount ?? 0,
    problems,
  };
}

/**
 * Invariant 9: a widget that reconnects sees the final state: every checkout session whose payment is mined on the
 * final chain is paid when the widget asks again (getSession, what it calls on reconnect and as fallback).
 */
export async function aReconnectingWidgetSeesEveryMinedPaymentPaid(
  run: InvariantInputs,
): Promise<InvariantReading> {
  const problems: string[] = [];
  for (const { sessionId, txHash } of run.record.checkoutPaid) {
    const receipt = await run.chain.getTransactionReceipt(txHash);
    if (receipt?.status !== 1) continue;
    const view = await getSession(run.baseUrl, sessionId).catch((error: Error) => ({
      status: `unreadable (${error.message})`,
    }));
    if (!/^(paid|paid_late|overpaid)$/.test(view.status))
      problems.push(`${sessionId} paid by ${txHash} but the widget sees ${view.status}`);
  }
  const byMode = (mode: string) => run.record.checkoutPaid.filter((p) => p.matching === mode).length;
  return {
    name: `a widget that reconnects sees every mined checkout payment as paid (${byMode('amount')} by amount, ${byMode('deposit_address')} by deposit address)`,
    checked: run.record.checkoutPaid.length,
    problems,
  };
}

/**
 * Invariant 9b: both matching modes ran. Every checkout session is matched the way its seller chose (a unique
 * amount on the checkout wallet, or its own deposit address; the load's prices are never crowded, so no fallback),
 * and the load saw sessions paid in each mode some seller chose (when it opened any: `make load` may run without).
 */
export async function checkoutSessionsRanInTheirSellersMode(run: InvariantInputs): Promise<InvariantReading> {
  const sessions = await run.client.query(
    `select s.session_id, s.deposit_address is not null as at_address, coalesce(p.checkout_matching, 'amount') as chosen
       from checkout.sessions s left join checkout.sellers p on p.seller_id = s.seller_id`,
  );
  const problems: string[] = sessions.rows
    .filter((r) => r.at_address !== (r.chosen === 'deposit_address'))
    .map(
      (r) =>
        `${r.session_id} ${r.at_address ? 'at a deposit address' : 'by amount'}, its seller chose ${r.chosen}`,
    );
  const chosen = await run.client.query(`select distinct checkout_matching as mode from checkout.sellers`);
  for (const { mode } of chosen.rows as Array<{ mode: keyof LoadRecord['checkoutPaidByMode'] }>) {
    if ((sessions.rowCount ?? 0) > 0 && (run.record.checkoutPaidByMode[mode] ?? 0) === 0)
      problems.push(`no session paid by ${mode}`);
  }
  const paid = run.record.checkoutPaidByMode;
  return {
    name: `checkout sessions matched as their seller chose, sessions paid in each mode (${paid.amount} by amount, ${paid.deposit_address} by deposit address)`,
    checked: sessions.rowCount ?? 0,
    problems,
  };
}
