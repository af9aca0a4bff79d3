import { type ClaimedVia, claimedViaOnWire, createEvent, type RpcRequest } from '@paygate/contracts';
import { formatUsdc, parseChainUsdc } from '@paygate/money';
import { preparedStatement } from '@paygate/runtime';
import { currentTraceCarrier } from '@paygate/telemetry';
import { type Kysely, sql } from 'kysely';
import { newClaimId } from '../ids';
import { transferKey } from '../ledger/entries';

/** A claim request as the ledger reads it: its payment path under one name, whichever name the wire used. */
export type ClaimRequest = Omit<RpcRequest<'ledger.claim_transfer'>, 'claimedVia' | 'channel'> & {
  claimedVia: ClaimedVia;
};

export interface ClaimRow {
  claim_id: string;
  claimed_via: ClaimedVia;
  reference: string;
  claimed_at: Date;
  /** The payment booked with the claim (null: it pays for nothing the ledger books). */
  payment_id: string | null;
}

export const claimKeyOf = (request: ClaimRequest) =>
  transferKey(request.chainId, request.txHash, request.logIndex);

/** The claim row as the statement returns it; `fresh` when this request inserted it. */
export interface ClaimOutcomeRow extends ClaimRow {
  fresh: boolean;
  /** The latest ledger transaction of the claim's payment (a repeat's answer); null when none is booked. */
  transaction_id: string | null;
  /** A payment of the transfer stands (a transaction not reversed): a repeat of the claim books nothing. */
  live: boolean;
}

/**
 * Claims each transfer, or finds who holds it, in one statement for all of them (the requests name distinct
 * transfers; each decides as it would alone): the request's claim, with the payment it books, is inserted with
 * its `transfer.claimed` outbox row, or the claim there before is returned with its payment's latest transaction.
 * Claims are inserted in transfer order, so two batches in flight never wait on each other crosswise. The requests
 * go in as arrays, so the statement is the same whatever their number (planned like one claim's). One row per
 * request, in order. Run in the transaction that books the fresh claims' payments (ClaimBatcher).
 */
export async function claimsOrHolders(
  db: Kysely<any>,
  requests: ClaimRequest[],
  now: Date,
): Promise<ClaimOutcomeRow[]> {
  // createEvent validated each event.
  const items = requests.map((request) => {
    const event = claimedEvent(request, newClaimId(), now);
    return { request, event, amountMicro: parseChainUsdc(request.amount).toString() };
  });
  const column = <T>(pick: (item: (typeof items)[number], index: number) => T) => items.map(pick);
  const rows = (
    await sql<
      ClaimOutcomeRow & { batch_index: number; pick: number }
    >`${preparedStatement('ledger_claims_booked')}
      with req as (
        select * from unnest(
            ${column((_, i) => i)}::integer[], ${column((x) => x.request.chainId)}::integer[],
            ${column((x) => x.request.txHash.toLowerCase())}::text[], ${column((x) => x.request.logIndex)}::integer[],
            ${column((x) => x.event.data.claimId)}::text[], ${column((x) => x.request.claimedVia)}::text[],
            ${column((x) => x.request.reference)}::text[], ${column((x) => x.request.payer.toLowerCase())}::text[],
            ${column((x) => x.amountMicro)}::bigint[], ${column((x) => x.request.payment?.paymentId ?? null)}::text[],
            ${column((x) => x.event.id)}::text[])
          as r(batch_index, chain_id, tx_hash, log_index, claim_id, claimed_via, reference, payer, amount_micro,
            payment_id, event_id)
      ),
      -- The envelopes travel as one JSON array (element i is request i's): as a text[] or jsonb[] the driver
      -- would escape every quote of every envelope into an array literal.
      envelopes as (
        select (e.ord - 1)::integer as batch_index, e.envelope
          from jsonb_array_elements(${JSON.stringify(column((x) => x.event))}::jsonb) with ordinality as e(envelope, ord)
      ),
      fresh as (
        insert into transfer_claims
            (chain_id, tx_hash, log_index, claim_id, claimed_via, reference, payer, amount_micro, claimed_at,
             payment_id)
          select chain_id, tx_hash, log_index, claim_id, claimed_via, reference, payer, amount_micro,
              ${now}::timestamptz, payment_id
            from req order by chain_id, tx_hash collate "C", log_index
          on conflict (chain_id, tx_hash, log_index) do nothing
          returning claim_id, claimed_via, reference, claimed_at, payment_id
      ),
      published as (
        insert into outbox (id, subject, envelope, published_at)
          select r.event_id, 'transfer.claimed', e.envelope, null
            from req r join fresh f using (claim_id) join envelopes e using (batch_index)
      )
      select r.batch_index, 0 as pick, true as fresh, f.claim_id, f.claimed_via, f.reference, f.claimed_at,
          f.payment_id, null::text as transaction_id, false as live
        from req r join fresh f using (claim_id)
      union all
      select r.batch_index, 1, false, c.claim_id, c.claimed_via, c.reference, c.claimed_at, c.payment_id,
          ${latestTransactionOf}, ${livePaymentOf}
        from req r
        -- One primary-key lookup per request (lateral, limit: never pulled up into a join). As a join, the plan
        -- cached for the prepared statement while the table was small hashed the whole table: a sequential scan
        -- of every claim ever made, per batch.
        cross join lateral (select c.chain_id, c.tx_hash, c.log_index, c.claim_id, c.claimed_via, c.reference,
              c.claimed_at, c.payment_id
            from transfer_claims c
            where c.chain_id = r.chain_id and c.tx_hash = r.tx_hash and c.log_index = r.log_index
            limit 1) c`.execute(db)
  ).rows;
  return heldInOrder(db, requests, rows);
}

/** The latest transaction of a claim row `c`'s payment on its transfer (a payment rebooked after a reorg has two). */
const latestTransactionOf = sql`(select t.id from transactions t
    where t.payment_id = c.payment_id and t.chain_id = c.chain_id and t.tx_hash = c.tx_hash
    order by t.created_at desc, t.id desc limit 1)`;

/**
 * Whether a payment of claim row `c`'s transfer stands (not reversed by a reorg or the chain check). A scalar
 * subquery with a limit, not `exists`: the generic plan of the prepared statement, made while the table was small,
 * may run an `exists` as a hashed subplan, a scan of every transaction ever booked per statement with a repeat.
 */
const livePaymentOf = sql`coalesce((select true from transactions t
    where t.chain_id = c.chain_id and t.tx_hash = c.tx_hash and t.log_index = c.log_index
      and t.escrow_status <> 'reversed'
    limit 1), false)`;

/**
 * Each request's row, in order: its own insert, else the claim row there before; read again when a concurrent
 * claim committed after the statement's snapshot.
 */
async function heldInOrder(
  db: Kysely<any>,
  requests: ClaimRequest[],
  rows: Array<ClaimOutcomeRow & { batch_index: number; pick: number }>,
): Promise<ClaimOutcomeRow[]> {
  // Per request, its own insert (pick 0) before the row there before (pick 1).
  const byRequest = new Map<number, ClaimOutcomeRow & { batch_index: number; pick: number }>();
  for (const row of rows) {
    const other = byRequest.get(Number(row.batch_index));
    if (!other || Number(row.pick) < Number(other.pick)) byRequest.set(Number(row.batch_index), row);
  }
  const out: ClaimOutcomeRow[] = [];
  for (const [i, request] of requests.entries()) {
    const found = byRequest.get(i);
    if (found) {
      const { batch_index: _, pick: __, ...held } = found;
      out.push(held);
      continue;
    }
    // A concurrent claim committed after this statement's snapshot was taken (its insert waited for it, then did
    // nothing): a new statement sees it.
    const held = (
      await sql<ClaimOutcomeRow>`select c.claim_id, c.claimed_via, c.reference, c.claimed_at, c.payment_id,
          ${latestTransactionOf} as transaction_id, ${livePaymentOf} as live
        from transfer_claims c
        where c.chain_id = ${request.chainId} and c.tx_hash = ${request.txHash.toLowerCase()}
          and c.log_index = ${request.logIndex}`.execute(db)
    ).rows[0];
    if (!held) throw new Error(`claim on ${claimKeyOf(request)} neither inserted nor found`);
    out.push({ ...held, fresh: false });
  }
  return out;
}

/** `transfer.claimed` for a fresh claim, written to the outbox by the claim's own statement or transaction. */
export function claimedEvent(request: ClaimRequest, claimId: string, now: Date) {
  return createEvent(
    'transfer.claimed',
    'escrow-ledger',
    {
      claimId,
      chainId: request.chainId,
      txHash: request.txHash.toLowerCase(),
      logIndex: request.logIndex,
      ...claimedViaOnWire(request.claimedVia),
      reference: request.reference,
      payer: request.payer,
      amount: formatUsdc(parseChainUsdc(request.amount)),
      claimedAt: now.toISOString(),
    },
    { trace: currentTraceCarrier() },
  );
}
