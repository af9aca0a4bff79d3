import {
  type ClaimedVia,
  claimedViaOnWire,
  createEvent,
  type RpcRequest,
  validateEvent,
} from '@paygate/contracts';
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
}

export const claimKeyOf = (request: ClaimRequest) =>
  transferKey(request.chainId, request.txHash, request.logIndex);

/** The claim row as the statement returns it; `fresh` when this request inserted it. */
export interface ClaimOutcomeRow extends ClaimRow {
  fresh: boolean;
}

/**
 * Claims each transfer, or finds who holds it, in one statement for all of them (the requests name distinct
 * transfers; each decides as it would alone): what the books already say spends it (a payment booked, or an
 * unmatched refund, that reached the ledger without a claim: events published before claims existed) holds it
 * first; otherwise the request's claim is inserted with its `transfer.claimed` outbox row. The requests go in as
 * arrays, so the statement is the same whatever their number (planned like one claim's). One row per request, in
 * order.
 */
export async function claimsOrHolders(
  db: Kysely<any>,
  requests: ClaimRequest[],
  now: Date,
): Promise<ClaimOutcomeRow[]> {
  const items = requests.map((request) => {
    const event = claimedEvent(request, newClaimId(), now);
    validateEvent(event);
    return { request, event, amountMicro: parseChainUsdc(request.amount).toString() };
  });
  const column = <T>(pick: (item: (typeof items)[number], index: number) => T) => items.map(pick);
  const rows = (
    await sql<ClaimOutcomeRow & { batch_index: number; pick: number }>`${preparedStatement('ledger_claims')}
      with req as (
        select * from unnest(
            ${column((_, i) => i)}::integer[], ${column((x) => x.request.chainId)}::integer[],
            ${column((x) => x.request.txHash.toLowerCase())}::text[], ${column((x) => x.request.logIndex)}::integer[],
            ${column((x) => x.event.data.claimId)}::text[], ${column((x) => x.request.claimedVia)}::text[],
            ${column((x) => x.request.reference)}::text[], ${column((x) => x.request.payer.toLowerCase())}::text[],
            ${column((x) => x.amountMicro)}::bigint[], ${column((x) => x.event.id)}::text[],
            ${column((x) => JSON.stringify(x.event))}::jsonb[])
          as r(batch_index, chain_id, tx_hash, log_index, claim_id, claimed_via, reference, payer, amount_micro,
            event_id, envelope)
      ),
      booked as (
        select r.batch_index, b.* from req r cross join lateral (
          select chain_id, tx_hash, log_index, 'clm_' || id as claim_id,
              case source when 'checkout' then 'checkout' else 'x402' end as claimed_via,
              case source when 'checkout' then coalesce(session_id, payment_id) else network || ':' || tx_hash end
                as reference,
              payer, amount_micro, confirmed_at as claimed_at
            from transactions
            where chain_id = r.chain_id and tx_hash = r.tx_hash and log_index = r.log_index
              and escrow_status <> 'reversed'
          union all
          select chain_id, tx_hash, log_index, 'clm_' || id, 'operator_refund', 'refund:' || transfer_refund_request_id,
              payer, amount_micro, created_at
            from refunds
            where kind = 'unmatched_transfer'
              and chain_id = r.chain_id and tx_hash = r.tx_hash and log_index = r.log_index
          limit 1
        ) as b
      ),
      booked_claim as (
        insert into transfer_claims
            (chain_id, tx_hash, log_index, claim_id, claimed_via, reference, payer, amount_micro, claimed_at)
          select chain_id, tx_hash, log_index, claim_id, claimed_via, reference, payer, amount_micro, claimed_at
            from booked
          on conflict do nothing
          returning chain_id, tx_hash, log_index, claim_id, claimed_via, reference, claimed_at
      ),
      fresh as (
        insert into transfer_claims
            (chain_id, tx_hash, log_index, claim_id, claimed_via, reference, payer, amount_micro, claimed_at)
          select chain_id, tx_hash, log_index, claim_id, claimed_via, reference, payer, amount_micro,
              ${now}::timestamptz
            from req r
            where not exists (select 1 from booked b where b.batch_index = r.batch_index)
          on conflict (chain_id, tx_hash, log_index) do nothing
          returning claim_id, claimed_via, reference, claimed_at
      ),
      published as (
        insert into outbox (id, subject, envelope, published_at)
          select r.event_id, 'transfer.claimed', r.envelope, null from req r join fresh f using (claim_id)
      )
      select r.batch_index, 0 as pick, true as fresh, f.claim_id, f.claimed_via, f.reference, f.claimed_at
        from req r join fresh f using (claim_id)
      union all
      select r.batch_index, 1, false, b.claim_id, b.claimed_via, b.reference, b.claimed_at
        from req r join booked_claim b using (chain_id, tx_hash, log_index)
      union all
      select r.batch_index, 2, false, c.claim_id, c.claimed_via, c.reference, c.claimed_at
        from req r join transfer_claims c using (chain_id, tx_hash, log_index)`.execute(db)
  ).rows;
  return heldInOrder(db, requests, rows);
}

/**
 * Each request's row, in order: the first of its own insert, the books' claim, the claim row there before; read
 * again when a concurrent claim committed after the statement's snapshot.
 */
async function heldInOrder(
  db: Kysely<any>,
  requests: ClaimRequest[],
  rows: Array<ClaimOutcomeRow & { batch_index: number; pick: number }>,
): Promise<ClaimOutcomeRow[]> {
  const out: ClaimOutcomeRow[] = [];
  for (const [i, request] of requests.entries()) {
    // The first of: this request's insert, the books' claim, the claim row there before.
    const found = rows
      .filter((row) => Number(row.batch_index) === i)
      .sort((x, y) => Number(x.pick) - Number(y.pick))[0];
    if (found) {
      const { batch_index: _, pick: __, ...held } = found;
      out.push(held);
      continue;
    }
    // A concurrent claim committed after this statement's snapshot was taken (its insert waited for it, then did
    // nothing): a new statement sees it.
    const held = (
      await sql<ClaimRow>`select claim_id, claimed_via, reference, claimed_at from transfer_claims
        where chain_id = ${request.chainId} and tx_hash = ${request.txHash.toLowerCase()}
          and log_index = ${request.logIndex}`.execute(db)
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
