/**
 * Money leaving Paygate's wallets, matched against the ledger (invariant 3 checks money arriving): every USDC
 * `Transfer` on the final chain out of the escrow wallet, the checkout deposit wallet or a session deposit address
 * to an address outside them (seller payouts, platform payouts, refunds of payments and of unmatched transfers)
 * is exactly one ledger entry crediting `escrow_asset` of the same amount and transaction, and every such entry is
 * on the chain. Moves between Paygate's own wallets (sweeps) are neither. And every deposit address still holding
 * USDC on chain must be listed as holding by settlement: reconciliation counts only the listed ones.
 */
import type pg from 'pg';
import { type InvariantInputs, type InvariantReading, TRANSFER_TOPIC, topicOf } from './invariant-check';

/** The ledger entries that say USDC left escrow on chain, and where each keeps its transaction hash. */
const OUTGOING_ENTRIES = `('payout_sent', 'platform_payout_sent', 'refund_sent')`;

const addressOf = (topic: string) => `0x${topic.slice(-40)}`.toLowerCase();

/** Per transaction and amount, what left a Paygate wallet on the final chain. */
type ChainOutflows = Map<string, { from: string; to: string; count: number }>;
/** Per transaction and amount, the ledger entries (not reversed) that say it left. */
type LedgerOutflows = Map<string, string[]>;

/** Invariant 3b: every USDC transfer out of escrow or a deposit address matches one ledger debit. */
export async function everyTransferOutIsOneLedgerDebit(run: InvariantInputs): Promise<InvariantReading> {
  const chainOut = await outflowsOnChain(run, await depositAddresses(run.client));
  const ledgerOut = await outflowsInLedger(run.client);
  const { problems, lost, duplicated, unexpected } = matchOutflows(chainOut, ledgerOut);
  // Why a lost one left: which outgoing record of settlement sent it (payout, platform payout, refund, sweep).
  for (const [i, problem] of problems.entries()) {
    const txHash = problem.split(' ')[1]?.split(':')[0];
    if (!txHash) continue;
    const source = await describeSettlementTransfer(run.client, txHash);
    if (source) problems[i] = `${problem}; settlement: ${source}`;
  }
  return {
    name: `every USDC transfer out of escrow or a deposit address matches one ledger debit (lost ${lost}, duplicated ${duplicated}, unexpected ${unexpected})`,
    checked: chainOut.size + ledgerOut.size,
    problems,
  };
}

/** Every deposit address Paygate handed out: checkout sessions' and the ones settlement lists. */
async function depositAddresses(client: pg.Client): Promise<string[]> {
  const deposits = await client.query(
    `select distinct lower(a) as a from (
       select deposit_address as a from checkout.sessions where deposit_address is not null
       union all select address from settlement.deposit_addresses) s`,
  );
  return deposits.rows.map((r) => r.a as string);
}

/** On chain: out of a Paygate wallet to someone else, per transaction and amount (one payout or refund each). */
async function outflowsOnChain(run: InvariantInputs, deposits: string[]): Promise<ChainOutflows> {
  const ours = new Set([run.escrowAddress, run.checkoutEscrowAddress, ...deposits].map(topicOf));
  const logs = await run.chain.getLogs({
    address: run.usdcAddress,
    topics: [TRANSFER_TOPIC],
    fromBlock: 0,
    toBlock: 'latest',
  });
  const chainOut: ChainOutflows = new Map();
  for (const l of logs) {
    const from = l.topics[1]!.toLowerCase();
    const to = l.topics[2]!.toLowerCase();
    if (!ours.has(from) || ours.has(to)) continue;
    const key = `${l.transactionHash.toLowerCase()}:${BigInt(l.data)}`;
    const seen = chainOut.get(key);
    if (seen) seen.count++;
    else chainOut.set(key, { from: addressOf(from), to: addressOf(to), count: 1 });
  }
  return chainOut;
}

/** In the ledger: each entry crediting escrow_asset for money sent, less any entry reversing it. */
async function outflowsInLedger(client: pg.Client): Promise<LedgerOutflows> {
  const entries = await client.query(
    `select e.entry_type, e.idempotency_key, lower(coalesce(e.memo->>'txHash', e.memo->>'refundTxHash')) as tx_hash,
            p.amount_micro::text as amount,
            exists (select 1 from ledger.journal_entries r where r.reverses_entry_id = e.id) as reversed
       from ledger.journal_entries e
       join ledger.postings p on p.entry_id = e.id and p.side = 'credit'
       join ledger.accounts a on a.id = p.account_id and a.kind = 'escrow_asset'
      where e.entry_type in ${OUTGOING_ENTRIES}`,
  );
  const ledgerOut: LedgerOutflows = new Map();
  for (const e of entries.rows) {
    if (e.reversed) continue;
    const key = `${e.tx_hash}:${e.amount}`;
    ledgerOut.set(key, [...(ledgerOut.get(key) ?? []), `${e.entry_type} ${e.idempotency_key}`]);
  }
  return ledgerOut;
}

/** Money out on chain the ledger lacks (lost), debited more often than sent (duplicated) or not sent at all. */
function matchOutflows(chainOut: ChainOutflows, ledgerOut: LedgerOutflows) {
  let lost = 0;
  let duplicated = 0;
  let unexpected = 0;
  const problems: string[] = [];
  for (const [key, out] of chainOut) {
    const booked = ledgerOut.get(key) ?? [];
    if (booked.length < out.count) {
      lost += out.count - booked.length;
      problems.push(
        `lost: ${key} from ${out.from} to ${out.to} on chain ×${out.count}, ledger debits ×${booked.length}`,
      );
    }
  }
  for (const [key, booked] of ledgerOut) {
    const out = chainOut.get(key);
    if (!out) {
      unexpected += booked.length;
      problems.push(`unexpected: ${key} debited by ${booked.join(', ')} but not on the final chain`);
    } else if (booked.length > out.count) {
      duplicated += booked.length - out.count;
      problems.push(
        `duplicated: ${key} debited ${booked.length}× (${booked.join(', ')}) for ${out.count} on chain`,
      );
    }
  }
  return { problems, lost, duplicated, unexpected };
}

/** Invariant 3c: every deposit address with USDC on chain is one reconciliation counts (settlement lists it as holding). */
export async function everyDepositAddressHoldingUsdcIsCounted(
  run: InvariantInputs,
): Promise<InvariantReading> {
  const deposits = await depositAddresses(run.client);
  const listed = await run.client.query(
    `select lower(address) as address, holding, check_due_at is not null as due from settlement.deposit_addresses`,
  );
  const byAddress = new Map(listed.rows.map((r) => [r.address as string, r]));
  const problems: string[] = [];
  for (const address of deposits) {
    const data = `0x70a08231${address.slice(2).padStart(64, '0')}`;
    const balance = BigInt(await run.chain.call({ to: run.usdcAddress, data }));
    if (balance === 0n) continue;
    const row = byAddress.get(address);
    if (!row?.holding)
      problems.push(
        `${address} holds ${balance} on chain but settlement lists it ${row ? `not holding (due ${row.due})` : 'not at all'}`,
      );
  }
  return {
    name: 'every deposit address holding USDC on chain is counted by reconciliation (settlement lists it holding)',
    checked: deposits.length,
    problems,
  };
}

/**
 * Invariant 3d: what the ledger's escrow_asset holds for each booked transfer in: its transfer_in entries (one per
 * inclusion) less its reversals must be its amount while it stands and nothing once it is reorged, a refunded one
 * too (its reversal moves the whole amount: what was refunded is owed by the seller of a payment, or by the payer
 * of an unmatched transfer, refund_receivable). And no entry moves escrow_asset but the known ones.
 */
export async function escrowAssetHoldsEachTransferInWhileOnChain({
  client,
}: InvariantInputs): Promise<InvariantReading> {
  const nets = await client.query(
    `select t.chain_id || ':' || t.tx_hash || ':' || t.log_index as key, t.status, t.inclusion, t.refund_id,
            t.amount_micro::text as amount, coalesce(n.net, 0)::text as net, coalesce(n.entries, '') as entries
       from ledger.transfers t
       left join (
         select e.memo->>'transfer' as key,
                sum(case p.side when 'debit' then p.amount_micro else -p.amount_micro end) as net,
                string_agg(e.entry_type || ' ' || p.side || ' ' || p.amount_micro, ', ' order by e.id) as entries
           from ledger.journal_entries e
           join ledger.postings p on p.entry_id = e.id
           join ledger.accounts a on a.id = p.account_id and a.kind = 'escrow_asset'
          where e.entry_type in ('transfer_in', 'transfer_reversal')
          group by 1) n on n.key = t.chain_id || ':' || t.tx_hash || ':' || t.log_index`,
  );
  const problems: string[] = [];
  for (const t of nets.rows) {
    const expected = t.status === 'observed' ? BigInt(t.amount) : 0n;
    if (BigInt(t.net) !== expected)
      problems.push(
        `${t.key} ${t.status} (inclusion ${t.inclusion}${t.refund_id ? `, refund ${t.refund_id}` : ''}) amount ${t.amount}: escrow_asset net ${t.net} from ${t.entries}`,
      );
  }
  const unknown = await client.query(
    `select e.entry_type, count(*)::int as n from ledger.journal_entries e
       join ledger.postings p on p.entry_id = e.id
       join ledger.accounts a on a.id = p.account_id and a.kind = 'escrow_asset'
      where e.entry_type not in ('transfer_in', 'transfer_reversal', ${OUTGOING_ENTRIES.slice(1, -1)})
      group by 1`,
  );
  for (const u of unknown.rows) problems.push(`escrow_asset moved by ${u.n} ${u.entry_type} entries`);
  return {
    name: 'escrow_asset per booked transfer in: its entries less its reversals equal it while on chain, 0 once reorged',
    checked: nets.rowCount ?? 0,
    problems,
  };
}

/** The settlement rows that name this transaction, so a violation says which outgoing path sent it. */
async function describeSettlementTransfer(client: pg.Client, txHash: string): Promise<string | undefined> {
  const found: string[] = [];
  const transfers = await client.query(
    `select transfer_id, kind, idempotency_key as key, status, amount_micro::text as amount from settlement.outgoing_transfers
      where lower(tx_hash) = $1`,
    [txHash],
  );
  for (const t of transfers.rows) found.push(`${t.kind} ${t.key} (${t.transfer_id}) ${t.status} ${t.amount}`);
  const relayed = await client.query(
    `select id, status, lower(payer) as payer from settlement.relayed_authorizations
      where lower(tx_hash) = $1 or lower(settled_tx_hash) = $1`,
    [txHash],
  );
  for (const r of relayed.rows) found.push(`relayed ${r.id} from ${r.payer} ${r.status}`);
  return found.length > 0 ? found.join('; ') : undefined;
}
