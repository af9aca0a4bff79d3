import { enqueueEvent, serveRpc } from '@paygate/bus';
import {
  type ClaimedVia,
  claimedViaOf,
  claimedViaOnWire,
  createEvent,
  type RpcReply,
  type RpcRequest,
  refundTakesOverClaim,
  validateEvent,
} from '@paygate/contracts';
import { formatUsdc, parseChainUsdc } from '@paygate/money';
import { type BackgroundTask, Counter, type ServiceContext } from '@paygate/runtime';
import { currentTraceCarrier } from '@paygate/telemetry';
import { type Kysely, sql, type Transaction } from 'kysely';
import type { LedgerDeps } from '../deps';
import { newClaimId } from '../ids';
import { transferKey } from '../ledger/entries';

export const CLAIM_TRANSFER_RPC = 'ledger.claim_transfer';
type ClaimReply = RpcReply<'ledger.claim_transfer'>;

export type { ClaimedVia };

/** A claim request as the ledger reads it: its payment path under one name, whichever name the wire used. */
type ClaimRequest = Omit<RpcRequest<'ledger.claim_transfer'>, 'claimedVia' | 'channel'> & {
  claimedVia: ClaimedVia;
};

/** What a claim through each payment path spent the transfer on, for the refusal message. */
export const CLAIMED_VIA_PURPOSE: Record<ClaimedVia, string> = {
  x402: 'a paid API call (x402 proof)',
  verify: "a seller's POST /api/verify",
  checkout: 'a checkout session',
  operator_refund: 'an operator refund to its sender',
};

interface ClaimRow {
  claim_id: string;
  claimed_via: ClaimedVia;
  reference: string;
  claimed_at: Date;
}

/**
 * The one claim on an on-chain transfer: the first (claimed_via, reference) to ask holds it, a repeat of the same
 * pair is answered ok again (fresh: false), anything else is refused with who holds it. The primary key of
 * `transfer_claims` decides between concurrent claims on every replica; a fresh claim publishes
 * `transfer.claimed` (outbox, same transaction). A payment or unmatched refund already on the books holds the
 * transfer even without a claim (booked before claims existed). An operator refund is also checked against the
 * ledger's books when the transfer is booked (reorged away, or a payer/amount other than the books: refused).
 * An operator refund naming an underpaid session (`underpaidSessionId`) takes over checkout's claim for that
 * session when no payment of the transfer is booked: the short transfer paid for nothing and goes back.
 */
export async function claimTransfer(
  ctx: ServiceContext,
  deps: LedgerDeps,
  wire: RpcRequest<'ledger.claim_transfer'>,
): Promise<ClaimReply> {
  const { claimedVia: _, channel: __, ...fields } = wire;
  const request: ClaimRequest = { ...fields, claimedVia: claimedViaOf(wire) };
  // A gateway's or checkout's claim is one statement (atomic on its own, one round trip: it is on the paid call's
  // path). An operator refund also reads the books and may take a claim over, so it runs in a transaction.
  if (request.claimedVia !== 'operator_refund') {
    const reply = await decideClaim(ctx.db, deps, request);
    if (reply.ok && reply.fresh) ctx.relay.kick();
    return reply;
  }
  return ctx.inTransaction(async (trx) => {
    const refused = await refundRefusedByBooks(trx, request);
    return refused ?? decideClaim(trx, deps, request);
  });
}

/** An operator refund of a transfer the books know with another payer or amount, or reorged away: refused. */
async function refundRefusedByBooks(
  trx: Transaction<any>,
  request: ClaimRequest,
): Promise<ClaimReply | undefined> {
  const txHash = request.txHash.toLowerCase();
  const booked = (
    await sql<{ amount_micro: bigint; from_address: string; status: string }>`
      select amount_micro, from_address, status from transfers
      where chain_id = ${request.chainId} and tx_hash = ${txHash} and log_index = ${request.logIndex}`.execute(
      trx,
    )
  ).rows[0];
  if (!booked) return undefined;
  const refusal =
    booked.status === 'reorged'
      ? ('transfer_reorged' as const)
      : booked.amount_micro !== parseChainUsdc(request.amount)
        ? ('amount_differs' as const)
        : booked.from_address.toLowerCase() !== request.payer.toLowerCase()
          ? ('payer_differs' as const)
          : null;
  if (!refusal) return undefined;
  return {
    ok: false,
    reason: refusal,
    message: `transfer ${transferKey(request.chainId, txHash, request.logIndex)} cannot be refunded as requested: ${refusal.replace('_', ' ')} on the ledger's books`,
    booked: { from: booked.from_address, amount: formatUsdc(booked.amount_micro) },
  };
}

/** The claim row as the statement returns it; `fresh` when this request inserted it. */
interface ClaimOutcomeRow extends ClaimRow {
  fresh: boolean;
}

/**
 * Claims the transfer, or finds who holds it, in one statement: what the books already say spends it (a payment
 * booked, or an unmatched refund, that reached the ledger without a claim: events published before claims
 * existed) holds it first; otherwise this request's claim is inserted with its `transfer.claimed` outbox row.
 */
async function claimOrHolder(
  db: Kysely<any>,
  request: ClaimRequest,
  claimId: string,
  now: Date,
): Promise<ClaimOutcomeRow | undefined> {
  const txHash = request.txHash.toLowerCase();
  const { chainId, logIndex } = request;
  const event = claimedEvent(request, claimId, now);
  validateEvent(event);
  const rows = (
    await sql<ClaimOutcomeRow>`
      with booked as (
        select chain_id, tx_hash, log_index, 'clm_' || id as claim_id,
            case source when 'checkout' then 'checkout' else 'x402' end as claimed_via,
            case source when 'checkout' then coalesce(session_id, payment_id) else network || ':' || tx_hash end
              as reference,
            payer, amount_micro, confirmed_at as claimed_at
          from transactions
          where chain_id = ${chainId} and tx_hash = ${txHash} and log_index = ${logIndex}
            and escrow_status <> 'reversed'
        union all
        select chain_id, tx_hash, log_index, 'clm_' || id, 'operator_refund', 'refund:' || transfer_refund_request_id,
            payer, amount_micro, created_at
          from refunds
          where kind = 'unmatched_transfer'
            and chain_id = ${chainId} and tx_hash = ${txHash} and log_index = ${logIndex}
        limit 1
      ),
      booked_claim as (
        insert into transfer_claims
            (chain_id, tx_hash, log_index, claim_id, claimed_via, reference, payer, amount_micro, claimed_at)
          select * from booked
          on conflict do nothing
          returning claim_id, claimed_via, reference, claimed_at
      ),
      fresh as (
        insert into transfer_claims
            (chain_id, tx_hash, log_index, claim_id, claimed_via, reference, payer, amount_micro, claimed_at)
          select ${chainId}::integer, ${txHash}::text, ${logIndex}::integer, ${claimId}::text,
              ${request.claimedVia}::text, ${request.reference}::text, ${request.payer.toLowerCase()}::text,
              ${parseChainUsdc(request.amount)}::bigint, ${now}::timestamptz
            where not exists (select 1 from booked)
          on conflict (chain_id, tx_hash, log_index) do nothing
          returning claim_id, claimed_via, reference, claimed_at
      ),
      published as (
        insert into outbox (id, subject, envelope, published_at)
          select ${event.id}::text, ${event.type}::text, ${JSON.stringify(event)}::jsonb, null from fresh
      )
      select true as fresh, * from fresh
      union all
      select false, * from booked_claim
      union all
      select false, claim_id, claimed_via, reference, claimed_at from transfer_claims
        where chain_id = ${chainId} and tx_hash = ${txHash} and log_index = ${logIndex}`.execute(db)
  ).rows;
  if (rows[0]) return rows[0];
  // A concurrent claim committed after this statement's snapshot was taken (its insert waited for it, then did
  // nothing): a new statement sees it.
  const held = (
    await sql<ClaimRow>`select claim_id, claimed_via, reference, claimed_at from transfer_claims
      where chain_id = ${chainId} and tx_hash = ${txHash} and log_index = ${logIndex}`.execute(db)
  ).rows[0];
  return held && { ...held, fresh: false };
}

async function decideClaim(db: Kysely<any>, deps: LedgerDeps, request: ClaimRequest): Promise<ClaimReply> {
  const txHash = request.txHash.toLowerCase();
  const key = transferKey(request.chainId, txHash, request.logIndex);
  const now = deps.now();
  const held = await claimOrHolder(db, request, newClaimId(), now);
  if (!held) throw new Error(`claim on ${key} neither inserted nor found`);
  if (held.fresh) return { ok: true, claimId: held.claim_id, fresh: true, claimedAt: now.toISOString() };
  const claimedAt = new Date(held.claimed_at).toISOString();
  if (held.claimed_via === request.claimedVia && held.reference === request.reference) {
    return { ok: true, claimId: held.claim_id, fresh: false, claimedAt };
  }
  // An operator returns the short transfer of an underpaid checkout session: checkout's claim for that session
  // paid for nothing, so the refund takes it over, unless a payment of the transfer is booked (a seller's money).
  // Only an operator refund takes over, and it runs in a transaction (claimTransfer).
  if (refundTakesOverClaim({ claimedVia: held.claimed_via, reference: held.reference }, request)) {
    const payer = request.payer.toLowerCase();
    const payment = (
      await sql<{ id: string }>`select id from transactions
        where chain_id = ${request.chainId} and tx_hash = ${txHash} and log_index = ${request.logIndex}
          and escrow_status <> 'reversed'
        limit 1`.execute(db)
    ).rows[0];
    if (!payment) {
      const claimId = newClaimId();
      const taken = (
        await sql<ClaimRow>`update transfer_claims
          set claim_id = ${claimId}, claimed_via = 'operator_refund', reference = ${request.reference},
            payer = ${payer}, amount_micro = ${parseChainUsdc(request.amount)}, claimed_at = ${now}
          where chain_id = ${request.chainId} and tx_hash = ${txHash} and log_index = ${request.logIndex}
            and claim_id = ${held.claim_id}
          returning claim_id, claimed_via, reference, claimed_at`.execute(db)
      ).rows[0];
      if (taken) {
        await enqueueEvent(db as Transaction<any>, claimedEvent(request, claimId, now));
        deps.logger.info(
          { transfer: key, sessionId: request.underpaidSessionId, claimId },
          'underpaid session claim released to an operator refund',
        );
        return { ok: true, claimId, fresh: true, claimedAt: now.toISOString() };
      }
    }
  }
  deps.logger.warn(
    { transfer: key, heldBy: held.claimed_via, refused: request.claimedVia },
    'second claim on a transfer refused',
  );
  return {
    ok: false,
    reason: 'claimed_elsewhere',
    message: `transfer ${key} already paid for ${CLAIMED_VIA_PURPOSE[held.claimed_via]}`,
    claimedBy: { ...claimedViaOnWire(held.claimed_via), claimedAt },
  };
}

/** `transfer.claimed` for a fresh claim, written to the outbox by the claim's own statement or transaction. */
function claimedEvent(request: ClaimRequest, claimId: string, now: Date) {
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

/** Answers `ledger.claim_transfer` (queue group of the ledger's replicas) and counts the outcomes. */
export class ClaimResponder implements BackgroundTask {
  private served: { stop(): Promise<void> } | undefined;
  private readonly outcomes: Counter<'claimed_via' | 'outcome'>;

  constructor(
    private readonly ctx: ServiceContext,
    private readonly deps: LedgerDeps,
  ) {
    this.outcomes = new Counter({
      name: 'ledger_transfer_claims_total',
      help: 'Claims on transfers by payment path (claimed_via) and outcome (claimed, repeated, or the refusal reason)',
      labelNames: ['claimed_via', 'outcome'] as const,
      registers: [ctx.metrics.registry],
    });
  }

  async start(): Promise<void> {
    this.served = await serveRpc(
      this.ctx.bus,
      CLAIM_TRANSFER_RPC,
      async (request) => {
        const reply = await claimTransfer(this.ctx, this.deps, request);
        const outcome = reply.ok ? (reply.fresh ? 'claimed' : 'repeated') : reply.reason;
        this.outcomes.inc({ claimed_via: claimedViaOf(request), outcome });
        return reply;
      },
      this.ctx.logger,
    );
  }

  async stop(): Promise<void> {
    await this.served?.stop();
  }
}
