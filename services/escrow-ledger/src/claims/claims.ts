import { enqueueEvent, serveRpc } from '@paygate/bus';
import {
  type ClaimedVia,
  claimedViaOf,
  claimedViaOnWire,
  type RpcReply,
  type RpcRequest,
  refundTakesOverClaim,
} from '@paygate/contracts';
import { formatUsdc, parseChainUsdc } from '@paygate/money';
import { type BackgroundTask, Counter, type ServiceContext, WriteBatcher } from '@paygate/runtime';
import { type Kysely, sql, type Transaction } from 'kysely';
import type { LedgerDeps } from '../deps';
import { newClaimId } from '../ids';
import { transferKey } from '../ledger/entries';
import {
  type ClaimOutcomeRow,
  type ClaimRequest,
  type ClaimRow,
  claimedEvent,
  claimKeyOf,
  claimsOrHolders,
} from './statement';

export const CLAIM_TRANSFER_RPC = 'ledger.claim_transfer';
type ClaimReply = RpcReply<'ledger.claim_transfer'>;

export type { ClaimedVia };

/** What a claim through each payment path spent the transfer on, for the refusal message. */
export const CLAIMED_VIA_PURPOSE: Record<ClaimedVia, string> = {
  x402: 'a paid API call (x402 proof)',
  verify: "a seller's POST /api/verify",
  checkout: 'a checkout session',
  operator_refund: 'an operator refund to its sender',
};

function claimRequestOf(wire: RpcRequest<'ledger.claim_transfer'>): ClaimRequest {
  const { claimedVia: _, channel: __, ...fields } = wire;
  return { ...fields, claimedVia: claimedViaOf(wire) };
}

function claimOperatorRefund(ctx: ServiceContext, deps: LedgerDeps, request: ClaimRequest) {
  return ctx.inTransaction(async (trx) => {
    const refused = await refundRefusedByBooks(trx, request);
    if (refused) return refused;
    const [held] = await claimsOrHolders(trx, [request], deps.now());
    return decideClaim(trx, deps, request, held!);
  });
}

interface QueuedClaim {
  request: ClaimRequest;
  resolve(reply: ClaimReply): void;
  reject(error: unknown): void;
}

/** Claim statements written at once by one ledger replica. */
const MAX_CLAIM_WRITES = 2;
/** How long after a batch of fresh claims their transfer.claimed are published (the relay's poll is 250 ms). */
const PUBLISH_AFTER_MS = 100;
/** Claims in one statement at most. */
const MAX_CLAIMS_PER_STATEMENT = 25;

/**
 * The one claim on an on-chain transfer: the first (claimed_via, reference) to ask holds it, a repeat of the same
 * pair is answered ok again (fresh: false), anything else is refused with who holds it. The primary key of
 * `transfer_claims` decides between concurrent claims on every replica; a fresh claim publishes
 * `transfer.claimed` (outbox, same transaction). A payment or unmatched refund already on the books holds the
 * transfer even without a claim (booked before claims existed). An operator refund is also checked against the
 * ledger's books when the transfer is booked (reorged away, or a payer/amount other than the books: refused).
 * An operator refund naming an underpaid session (`underpaidSessionId`) takes over checkout's claim for that
 * session when no payment of the transfer is booked: the short transfer paid for nothing and goes back. *
 * A gateway's or checkout's claim is one statement (atomic on its own, one round trip: it is on the paid call's
 * path); the claims that arrive together are written as one statement: those whose requests came in the same turn
 * of the event loop, or while MAX_CLAIM_WRITES statements were being written (one round trip and one commit for a
 * burst of ten settles instead of ten). Each claim keeps its own outcome: the statement holds each claim's own
 * insert-or-find, so a claim decides exactly as it would alone; two claims of one transfer never share a
 * statement (the second waits for the next one and is answered from the row the first decided); a statement that
 * fails is retried claim by claim, so one claim's failure is only its own. An operator refund also reads the
 * books and may take a claim over, so it runs alone, in a transaction.
 */
export class ClaimBatcher {
  private readonly batcher = new WriteBatcher<QueuedClaim>({
    maxWrites: MAX_CLAIM_WRITES,
    maxPerWrite: MAX_CLAIMS_PER_STATEMENT,
    fits: (batch, item) => !batch.some((other) => claimKeyOf(other.request) === claimKeyOf(item.request)),
    write: (batch) => this.writeBatch(batch),
  });

  constructor(
    private readonly ctx: ServiceContext,
    private readonly deps: LedgerDeps,
  ) {}

  claim(wire: RpcRequest<'ledger.claim_transfer'>): Promise<ClaimReply> {
    const request = claimRequestOf(wire);
    if (request.claimedVia === 'operator_refund') return claimOperatorRefund(this.ctx, this.deps, request);
    return new Promise<ClaimReply>((resolve, reject) => this.batcher.add({ request, resolve, reject }));
  }

  /** One statement for the batch; when it fails, each claim alone (one claim's failure is only its own). */
  private async writeBatch(batch: QueuedClaim[]): Promise<void> {
    let helds: ClaimOutcomeRow[];
    try {
      helds = await claimsOrHolders(
        this.ctx.db,
        batch.map((item) => item.request),
        this.deps.now(),
      );
    } catch (error) {
      if (batch.length === 1) {
        batch[0]!.reject(error);
        return;
      }
      await Promise.all(
        batch.map(async (item) => {
          let held: ClaimOutcomeRow[];
          try {
            held = await claimsOrHolders(this.ctx.db, [item.request], this.deps.now());
          } catch (alone) {
            item.reject(alone);
            return;
          }
          await this.answer([item], held);
        }),
      );
      return;
    }
    await this.answer(batch, helds);
  }

  /** Each claim's reply from the row its part of the statement found; the relay woken for fresh claims. */
  private async answer(batch: QueuedClaim[], helds: ClaimOutcomeRow[]): Promise<void> {
    // transfer.claimed goes out once the claims were answered, not between the answers of a burst.
    if (helds.some((held) => held.fresh)) this.ctx.relay.kickSoon(PUBLISH_AFTER_MS);
    for (const [i, item] of batch.entries()) {
      await decideClaim(this.ctx.db, this.deps, item.request, helds[i]!).then(item.resolve, item.reject);
    }
  }
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

/** The reply to a claim from what its statement found (`held`); an operator refund may take a claim over here. */
async function decideClaim(
  db: Kysely<any>,
  deps: LedgerDeps,
  request: ClaimRequest,
  held: ClaimOutcomeRow,
): Promise<ClaimReply> {
  const txHash = request.txHash.toLowerCase();
  const key = transferKey(request.chainId, txHash, request.logIndex);
  const now = deps.now();
  if (held.fresh) {
    return {
      ok: true,
      claimId: held.claim_id,
      fresh: true,
      claimedAt: new Date(held.claimed_at).toISOString(),
    };
  }
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

/** Answers `ledger.claim_transfer` (queue group of the ledger's replicas) and counts the outcomes. */
export class ClaimResponder implements BackgroundTask {
  private served: { stop(): Promise<void> } | undefined;
  private readonly outcomes: Counter<'claimed_via' | 'outcome'>;
  private readonly batcher: ClaimBatcher;

  constructor(
    private readonly ctx: ServiceContext,
    deps: LedgerDeps,
  ) {
    this.batcher = new ClaimBatcher(ctx, deps);
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
        const reply = await this.batcher.claim(request);
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
