/**
 * What must hold once the faults stop and the system drained, checked through the public API (reconciliation),
 * the chain (logs and receipts of the final chain) and read-only SQL on each service's schema. Each check gives a
 * count of violations (0 passes) and a few examples.
 */
import { getSession } from '@paygate/checkout-widget/api';
import { CONSUMERS, SUBJECTS, type Subject } from '@paygate/contracts';
import { type JsonRpcProvider, id as keccakId, zeroPadValue } from 'ethers';
import pg from 'pg';
import { checkOutflows } from './invariants-outflows';
import type { LoadRecord } from './load';
import type { WebhookReceiver } from './webhook-receiver';

export const SCHEMAS: Record<string, string> = {
  registry: 'registry',
  'gateway-proxy': 'gateway',
  checkout: 'checkout',
  'chain-indexer': 'indexer',
  'escrow-ledger': 'ledger',
  settlement: 'settlement',
  notifier: 'notifier',
};

export interface InvariantResult {
  name: string;
  checked: number;
  violations: number;
  examples: string[];
}

const TRANSFER_TOPIC = keccakId('Transfer(address,address,uint256)');

/** Rows still in flight: nothing of this may be left 120 s after the last fault. */
export async function pendingWork(client: pg.Client): Promise<Record<string, number>> {
  const pending: Record<string, number> = {};
  for (const schema of Object.values(SCHEMAS)) {
    const r = await client.query(
      `select count(*)::int as n from ${schema}.outbox where published_at is null`,
    );
    pending[`${schema}.outbox unpublished`] = r.rows[0].n;
  }
  const q = async (label: string, text: string) => {
    pending[label] = (await client.query(text)).rows[0].n;
  };
  await q(
    'settlement.outgoing_transfers open',
    `select count(*)::int as n from settlement.outgoing_transfers where status not in ('confirmed','failed')`,
  );
  await q(
    'settlement.settlements pending/sending',
    `select count(*)::int as n from settlement.settlements where status in ('pending','sending')`,
  );
  await q(
    'settlement.refunds sending',
    `select count(*)::int as n from settlement.refunds where status = 'sending'`,
  );
  await q('ledger.refunds pending', `select count(*)::int as n from ledger.refunds where status = 'pending'`);
  await q(
    'notifier.webhook_deliveries pending',
    `select count(*)::int as n from notifier.webhook_deliveries where status = 'pending'`,
  );
  await q(
    'ledger.transactions payout_pending',
    `select count(*)::int as n from ledger.transactions where escrow_status = 'payout_pending'`,
  );
  return pending;
}

export async function checkInvariants(options: {
  databaseUrl: string;
  baseUrl: string;
  operatorToken: string;
  chain: JsonRpcProvider;
  usdcAddress: string;
  escrowAddress: string;
  checkoutEscrowAddress: string;
  record: LoadRecord;
  webhooks: WebhookReceiver;
}): Promise<InvariantResult[]> {
  const client = new pg.Client({ connectionString: options.databaseUrl });
  await client.connect();
  const results: InvariantResult[] = [];
  const add = (name: string, checked: number, bad: string[]) =>
    results.push({ name, checked, violations: bad.length, examples: bad.slice(0, 5) });
  try {
    await client.query('set default_transaction_read_only = on');

    // 1. Reconciliation (the operator's API): the ledger's escrow account equals the chain, no exposure.
    const reconciliation = (await fetch(`${options.baseUrl}/api/v1/reconciliation`, {
      headers: { authorization: `Bearer ${options.operatorToken}` },
      signal: AbortSignal.timeout(30_000),
    }).then((r) => r.json())) as { balanced?: boolean; difference?: string };
    add(
      'reconciliation: balanced, difference 0',
      1,
      reconciliation.balanced === true && reconciliation.difference === '0'
        ? []
        : // Whole: which check differs, and by how much, is the post-mortem's starting point.
          [JSON.stringify(reconciliation)],
    );

    // 2. Double entry: the postings sum to zero (one asset, USDC).
    const sum = await client.query(
      `select coalesce(sum(case side when 'debit' then amount_micro else -amount_micro end), 0)::text as s, count(*)::int as n from ledger.postings`,
    );
    add('ledger postings sum to zero', sum.rows[0].n, sum.rows[0].s === '0' ? [] : [`sum ${sum.rows[0].s}`]);

    // 3. Every transfer into escrow on the final chain credited exactly once, and every booked one still on chain.
    // Paygate's money arrives at the escrow wallet (agent payments, unmatched transfers) or at a checkout
    // session's own deposit address, which settlement then sweeps into the escrow. The sweep moves money already
    // credited (the buyer's transfer to the deposit address), so it is no credit of its own.
    const deposits = new Set(
      (
        await client.query(
          `select lower(deposit_address) as a from checkout.sessions where deposit_address is not null`,
        )
      ).rows.map((r) => zeroPadValue(r.a, 32).toLowerCase()),
    );
    const escrowTopic = zeroPadValue(options.escrowAddress, 32).toLowerCase();
    // Checkout's shared deposit wallet (transfers matching no session land there) is Paygate's money too.
    const checkoutTopic = zeroPadValue(options.checkoutEscrowAddress, 32).toLowerCase();
    const logs = (
      await options.chain.getLogs({
        address: options.usdcAddress,
        topics: [TRANSFER_TOPIC],
        fromBlock: 0,
        toBlock: 'latest',
      })
    ).filter(
      (l) =>
        [escrowTopic, checkoutTopic].includes(l.topics[2]!.toLowerCase()) ||
        deposits.has(l.topics[2]!.toLowerCase()),
    );
    // A move between Paygate's own wallets (a deposit address or the shared deposit wallet swept into the escrow).
    const isSweep = (l: (typeof logs)[number]) =>
      (deposits.has(l.topics[1]!.toLowerCase()) || l.topics[1]?.toLowerCase() === checkoutTopic) &&
      l.topics[2]?.toLowerCase() === escrowTopic;
    const sweeps = logs.filter(isSweep);
    const onChain = new Map(
      logs
        .filter((l) => !isSweep(l))
        .map((l) => [`${l.transactionHash.toLowerCase()}:${l.index}`, BigInt(l.data)]),
    );
    const booked = await client.query(
      `select tx_hash, log_index, amount_micro::text as amount, status, booked_by, block_number::text as block_number from ledger.transfers`,
    );
    const bookedMap = new Map(booked.rows.map((r) => [`${r.tx_hash}:${r.log_index}`, r]));
    const transferProblems: string[] = [];
    for (const [key, amount] of onChain) {
      const row = bookedMap.get(key);
      if (!row) transferProblems.push(`${key} on chain, not in the ledger`);
      else if (row.status !== 'observed') transferProblems.push(`${key} on chain but ${row.status}`);
      else if (BigInt(row.amount) !== amount)
        transferProblems.push(`${key} amount ${row.amount} vs chain ${amount}`);
    }
    const sweepKeys = new Set(sweeps.map((l) => `${l.transactionHash.toLowerCase()}:${l.index}`));
    for (const [key, row] of bookedMap) {
      if (row.status !== 'observed' || onChain.has(key) || sweepKeys.has(key)) continue;
      // What the indexer knew of it, to tell a missed reorg from a transfer the indexer never saw.
      const [txHash, logIndex] = key.split(':');
      const indexed = await client.query(
        `select status, block_number::text as block from indexer.transfers where tx_hash = $1 and log_index = $2`,
        [txHash, Number(logIndex)],
      );
      const seen = indexed.rows.map((r) => `${r.status}@${r.block}`).join(',') || 'never indexed';
      transferProblems.push(
        `${key} booked (by ${row.booked_by}, block ${row.block_number}) but not on the chain, not reversed; indexer: ${seen}`,
      );
    }
    add(
      `every transfer into escrow or a checkout deposit address credited exactly once; reorged-out ones reversed (${sweeps.length} sweeps from deposits into escrow apart)`,
      onChain.size,
      transferProblems,
    );

    // 3b. Every transfer out of escrow or a deposit address is one ledger debit, and every deposit address
    //     holding money is counted by reconciliation (so a reconciliation difference names its path).
    for (const check of await checkOutflows({ client, ...options }))
      add(check.name, check.checked, check.problems);

    // 4. Every served paid call: exactly one ledger payment for its transfer; no transfer served twice.
    const servedProblems: string[] = [];
    // Live payments only: a payment reversed when its transaction left the chain and booked again when the same
    // transaction was mined again is one sale (its reversed transaction stays as history).
    const payments = await client.query(
      `select tx_hash, count(*) filter (where escrow_status <> 'reversed')::int as live
         from ledger.transactions group by tx_hash`,
    );
    const paymentsByTx = new Map(payments.rows.map((r) => [r.tx_hash, r]));
    for (const [txHash, served] of options.record.served) {
      if (served.count !== 1) servedProblems.push(`${txHash} served ${served.count} times`);
      const live = paymentsByTx.get(txHash.toLowerCase())?.live ?? 0;
      // Mined on the final chain: exactly one live payment. Reorged out since: none (reversed).
      const receipt = await options.chain.getTransactionReceipt(txHash);
      if (receipt?.status === 1) {
        if (live === 0) servedProblems.push(`${txHash} served, on chain, no ledger payment`);
        else if (live !== 1) servedProblems.push(`${txHash} has ${live} ledger payments`);
      } else if (live > 0) {
        servedProblems.push(`${txHash} served, not on chain, but ${live} ledger payment(s) not reversed`);
      }
    }
    add(
      'every served call has exactly one ledger payment, no transfer served twice',
      options.record.served.size,
      servedProblems,
    );

    // 5. Every completed settlement: exactly one confirmed payout of its amount, mined on the final chain.
    const settlements = await client.query(
      `select s.settlement_id, s.amount_micro::text as amount, s.payout_address, s.status, o.tx_hash, o.status as transfer_status,
              o.amount_micro::text as transfer_amount, coalesce(s.failure_reason, o.last_error) as reason
         from settlement.settlements s left join settlement.outgoing_transfers o on o.transfer_id = s.transfer_id
        where s.status in ('completed', 'sending', 'pending', 'failed')`,
    );
    const settlementProblems: string[] = [];
    for (const s of settlements.rows) {
      if (s.status !== 'completed') {
        // Why, for the post-mortem: the replica logs keep only their last lines.
        settlementProblems.push(
          `${s.settlement_id} ${s.status}${s.reason ? `: ${String(s.reason).slice(0, 160)}` : ''}`,
        );
        continue;
      }
      if (s.transfer_status !== 'confirmed' || s.transfer_amount !== s.amount) {
        settlementProblems.push(`${s.settlement_id} transfer ${s.transfer_status} ${s.transfer_amount}`);
        continue;
      }
      const receipt = await options.chain.getTransactionReceipt(s.tx_hash);
      const paid = receipt?.logs.some(
        (l) =>
          l.topics[0] === TRANSFER_TOPIC &&
          l.topics[2]?.toLowerCase() === zeroPadValue(s.payout_address, 32).toLowerCase() &&
          BigInt(l.data) === BigInt(s.amount),
      );
      if (receipt?.status !== 1 || !paid)
        settlementProblems.push(`${s.settlement_id} payout ${s.tx_hash} not mined on the final chain`);
    }
    add(
      'every settlement has exactly one mined payout of its amount',
      settlements.rowCount ?? 0,
      settlementProblems,
    );

    // 6. Every refund: exactly one mined refund transfer (ledger refund completed ⇔ settlement refund confirmed).
    const refunds = await client.query(
      `select l.id, l.status, l.amount_micro::text as amount, l.refund_tx_hash from ledger.refunds l`,
    );
    const refundProblems: string[] = [];
    for (const r of refunds.rows) {
      if (r.status !== 'completed') {
        refundProblems.push(`${r.id} ${r.status}`);
        continue;
      }
      const receipt = await options.chain.getTransactionReceipt(r.refund_tx_hash);
      if (receipt?.status !== 1)
        refundProblems.push(`${r.id} refund ${r.refund_tx_hash} not mined on the final chain`);
    }
    const twice = await client.query(
      `select transaction_id, count(*)::int as n from settlement.refunds group by refund_id, transaction_id having count(*) > 1`,
    );
    for (const r of twice.rows) refundProblems.push(`refund of ${r.transaction_id} sent ${r.n} times`);
    add('every refund has exactly one mined refund transfer', refunds.rowCount ?? 0, refundProblems);

    // 7. Every outbox event reached each of its consumers exactly once (lost / unexpected; the inbox key makes a
    //    second application impossible, which checks 3-6 confirm on the money side).
    let lost = 0;
    let unexpected = 0;
    let checked = 0;
    const queueProblems: string[] = [];
    for (const [service, consumers] of Object.entries(CONSUMERS)) {
      for (const [durable, subject] of Object.entries(consumers as Record<string, Subject>)) {
        const owners = SUBJECTS[subject].owners as readonly string[];
        const produced = new Set<string>();
        for (const owner of owners) {
          const rows = await client.query(`select id from ${SCHEMAS[owner]}.outbox where subject = $1`, [
            subject,
          ]);
          for (const row of rows.rows) produced.add(row.id);
        }
        const consumed = await client.query(
          `select event_id from ${SCHEMAS[service]}.inbox where consumer = $1`,
          [durable],
        );
        const seen = new Set(consumed.rows.map((r) => r.event_id as string));
        checked += produced.size;
        for (const id of produced) {
          if (seen.has(id)) continue;
          lost++;
          queueProblems.push(`${durable} lost ${subject} ${id}`);
        }
        for (const id of seen) {
          if (produced.has(id)) continue;
          unexpected++;
          queueProblems.push(`${durable} unexpected ${id}`);
        }
      }
    }
    add(
      `every outbox event reached each consumer exactly once (lost ${lost}, duplicated 0 by key, unexpected ${unexpected})`,
      checked,
      queueProblems,
    );

    // 8. Every webhook event delivered at least once with its event id.
    const events = await client.query(
      `select e.event_id, bool_or(d.status = 'delivered') as delivered from notifier.webhook_events e
         join notifier.webhook_deliveries d on d.event_id = e.event_id group by e.event_id`,
    );
    const webhookProblems: string[] = [];
    for (const e of events.rows) {
      if (!e.delivered) webhookProblems.push(`${e.event_id} not delivered`);
      else if (!options.webhooks.accepted.has(e.event_id))
        webhookProblems.push(`${e.event_id} marked delivered, never received`);
    }
    add(
      'every webhook event delivered at least once with its event id',
      events.rowCount ?? 0,
      webhookProblems,
    );

    // 9. A widget that reconnects sees the final state: every checkout session whose payment is mined on the
    //    final chain is paid when the widget asks again (getSession, what it calls on reconnect and as fallback).
    const widgetProblems: string[] = [];
    for (const { sessionId, txHash } of options.record.checkoutPaid) {
      const receipt = await options.chain.getTransactionReceipt(txHash);
      if (receipt?.status !== 1) continue;
      const view = await getSession(options.baseUrl, sessionId).catch((error: Error) => ({
        status: `unreadable (${error.message})`,
      }));
      if (!/^(paid|paid_late|overpaid)$/.test(view.status))
        widgetProblems.push(`${sessionId} paid by ${txHash} but the widget sees ${view.status}`);
    }
    add(
      'a widget that reconnects sees every mined checkout payment as paid',
      options.record.checkoutPaid.length,
      widgetProblems,
    );

    // 10. Nothing pending after the drain.
    const pending = await pendingWork(client);
    add(
      'nothing accepted is still pending after the drain',
      Object.keys(pending).length,
      Object.entries(pending)
        .filter(([, n]) => n > 0)
        .map(([what, n]) => `${what}: ${n}`),
    );
  } finally {
    await client.end().catch(() => undefined);
  }
  return results;
}
