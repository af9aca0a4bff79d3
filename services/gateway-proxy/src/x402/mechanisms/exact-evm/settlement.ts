import type { RelayerSubmitReply, TransferAuthorization } from '@paygate/contracts';
import type { GatewayProxyConfig } from '../../../config';
import type { GatewayContext } from '../../../db';
import { LedgerClaimRefused } from '../../../errors';
import type { PaymentClaim, PaymentService, Purchase } from '../../../payments/service';
import { isX402Reason, PAYGATE_REASONS, UPSTREAM_REASONS, type X402Reason } from '../../../reasons';
import type { DecodedX402Payment } from '../../protocol';
import {
  type AuthorizationKey,
  type AuthorizationRow,
  authorizationOfRow,
  type ClaimedAuthorization,
  keyOfRow,
  purchaseOfRow,
  type X402Authorizations,
} from './authorizations';
import type { RelayerClient } from './relayer-client';

export interface X402Timings {
  /** The gateway's checks and the relayer's before simulating. */
  verificationMs: number;
  simulationMs: number;
  submissionMs: number;
  inclusionMs: number;
  /** After the relayer's answer: the ledger's claim and the claim row with the authorization's record. */
  claimMs?: number;
}

export type X402Outcome =
  | { ok: true; claim: PaymentClaim; txHash: string; payer: string; fresh: boolean; timings: X402Timings }
  | {
      ok: false;
      /** 202: `settlement_pending` (sent, not included yet: served once presented again); 409: payment id conflict. */
      status: 202 | 402 | 409 | 429 | 503;
      reason: X402Reason;
      message: string;
      transaction?: string;
      /** 429 only: when the day's budget starts afresh. */
      retryAfterSeconds?: number;
      /** 503 only: `settling` is `submitting` under another caller, whose settlement this one may wait for. */
      beingSettled?: true;
      settling?: { key: AuthorizationKey; signature: string };
    };

export type Refused = Extract<X402Outcome, { ok: false }>;
export const refused = (status: 402 | 409 | 503, reason: X402Reason, message: string): Refused => ({
  ok: false,
  status,
  reason,
  message,
});

const NO_TIMINGS: X402Timings = { verificationMs: 0, simulationMs: 0, submissionMs: 0, inclusionMs: 0 };

/** A payment settled before (by a copy, a replica or the recovery pass): its claim, not fresh. */
const settledBefore = (claim: PaymentClaim): X402Outcome => ({
  ok: true,
  claim,
  txHash: claim.tx_hash,
  payer: claim.payer,
  fresh: false,
  timings: NO_TIMINGS,
});

const { chainUnavailable, relayerUnavailable, settlementInProgress, claimUnavailable } = PAYGATE_REASONS;

const beingSettled = (what: string): Refused => ({
  ...refused(503, settlementInProgress, `${what} is being settled; present it again shortly`),
  beingSettled: true,
});

/** Sent, not included yet: 202 with the transaction, never a 402 that would have a client sign a second payment. */
export const settlementPending = (txHash: string): Refused => ({
  ok: false,
  status: 202,
  reason: UPSTREAM_REASONS.settlementPending,
  message: `transaction ${txHash} is sent but not included yet; present the same payment (or payment identifier) again shortly: nothing more is charged`,
  transaction: txHash,
});

const alreadyPaid = (txHash: string) =>
  refused(402, UPSTREAM_REASONS.nonceAlreadyUsed, `transaction ${txHash} already paid for something`);

type RelayerRefusal = Extract<RelayerSubmitReply, { ok: false }>;

/** The relayer's refusals, as x402 reason codes; transient ones (nothing was sent) answer 503. */
const RELAYER_REASONS: Record<RelayerRefusal['reason'], [402 | 503, X402Reason]> = {
  invalid_request: [402, UPSTREAM_REASONS.payload],
  internal_error: [503, relayerUnavailable],
  relayer_unavailable: [503, relayerUnavailable],
  relayer_out_of_gas: [503, relayerUnavailable],
  chain_unavailable: [503, chainUnavailable],
  insufficient_funds: [402, UPSTREAM_REASONS.insufficientBalance],
  invalid_signature: [402, UPSTREAM_REASONS.signature],
  authorization_expired: [402, UPSTREAM_REASONS.validBefore],
  authorization_not_yet_valid: [402, UPSTREAM_REASONS.validAfter],
  nonce_already_used: [402, UPSTREAM_REASONS.nonceAlreadyUsed],
  authorization_conflict: [402, UPSTREAM_REASONS.nonceAlreadyUsed],
  simulation_failed: [402, UPSTREAM_REASONS.simulationFailed],
  transaction_failed: [402, UPSTREAM_REASONS.transactionFailed],
};

type Included = Extract<RelayerSubmitReply, { ok: true }>;

/** Submits claimed authorizations through the relayer, claims included transfers like any payment, answers replays. */
export class X402Settlement {
  constructor(
    private readonly logger: GatewayContext['logger'],
    private readonly payments: PaymentService,
    private readonly relayer: RelayerClient,
    private readonly authorizations: X402Authorizations,
    /** `staleAfterMs`: an authorization `submitting` this long has no live caller any more. */
    private readonly settings: Pick<
      GatewayProxyConfig,
      'chainId' | 'usdcAddress' | 'x402InclusionWaitMs' | 'retryWindowSeconds' | 'now'
    > & { staleAfterMs: number },
  ) {}

  private send(authorization: TransferAuthorization, signature: string, waitForReceiptMs: number) {
    const { chainId, usdcAddress } = this.settings;
    return this.relayer.submit({ chainId, token: usdcAddress, authorization, signature, waitForReceiptMs });
  }

  async submit(
    claimed: ClaimedAuthorization,
    payment: DecodedX402Payment,
    purchase: Purchase,
    verificationMs: number,
  ): Promise<X402Outcome> {
    const a = payment.authorization;
    let reply: RelayerSubmitReply;
    try {
      reply = await this.send(a, payment.signature, this.settings.x402InclusionWaitMs);
    } catch (error) {
      this.logger.warn(
        { err: error, payer: a.from },
        'relayer did not answer; the recovery pass will finish',
      );
      return refused(
        503,
        relayerUnavailable,
        'settlement did not answer in time; present the same payment again',
      );
    }
    if (!reply.ok) return this.relayerRefused(claimed, reply);
    if (reply.status !== 'confirmed') {
      // Nobody waits for it any more: the same payment presented again (or the recovery pass) takes it over.
      await this.authorizations.releasePending(claimed, reply.txHash, this.staleBefore());
      return settlementPending(reply.txHash);
    }
    const claimStarted = performance.now();
    const claim = await this.claimOrUnavailable(claimed.key, payment, purchase, reply, 'live');
    if (!claim || 'ok' in claim) return claim ?? alreadyPaid(reply.txHash);
    const t = reply.timings;
    return {
      ok: true,
      claim,
      txHash: reply.txHash,
      payer: a.from,
      fresh: true,
      timings: {
        verificationMs: verificationMs + t.checksMs,
        simulationMs: t.simulationMs,
        submissionMs: t.submissionMs,
        inclusionMs: t.inclusionMs,
        claimMs: performance.now() - claimStarted,
      },
    };
  }

  private async relayerRefused(claimed: ClaimedAuthorization, reply: RelayerRefusal): Promise<Refused> {
    const [status, reason] = RELAYER_REASONS[reply.reason];
    // Nothing was sent on a 503: the same authorization may be presented again.
    if (status === 503) await this.authorizations.forget(claimed);
    else await this.authorizations.markRefused(claimed.key, reason);
    return refused(status, reason, reply.message);
  }

  /** A ledger that did not answer is a 503: the row stays `submitting`, the recovery pass claims it later. */
  private async claimOrUnavailable(
    ...args: Parameters<X402Settlement['claimTransfer']>
  ): Promise<PaymentClaim | Refused | undefined> {
    try {
      return await this.claimTransfer(...args);
    } catch (error) {
      if (!(error instanceof LedgerClaimRefused)) throw error;
      return refused(503, claimUnavailable, error.failure.message);
    }
  }

  /** No claim when another payment path spent it first; the recovery pass's (or a replica's) claim when it was first. */
  private async claimTransfer(
    key: AuthorizationKey,
    payment: Pick<DecodedX402Payment, 'authorization'>,
    purchase: Purchase,
    reply: Included,
    mode: 'live' | 'recovered',
  ): Promise<PaymentClaim | undefined> {
    const settlement = { txHash: reply.txHash, logIndex: reply.logIndex ?? null };
    let claim: PaymentClaim | undefined;
    let recorded: boolean;
    try {
      ({ claim, recorded } = await this.payments.rows.insertRecorded(
        {
          txHash: reply.txHash,
          logIndex: reply.logIndex!,
          payer: payment.authorization.from,
          token: this.settings.usdcAddress,
          amountMicro: BigInt(payment.authorization.value),
        },
        purchase,
        // A payment settled after its caller gave up stays usable for a retry of the same resource.
        mode === 'recovered'
          ? {
              state: 'retryable',
              retryUntil: new Date(this.settings.now().getTime() + this.settings.retryWindowSeconds * 1000),
            }
          : {},
        this.authorizations.settlementStatement(key, settlement),
      ));
    } catch (error) {
      // Another payment path (a checkout session, /api/verify) spent this transfer first: refused like a local claim.
      if (!(error instanceof LedgerClaimRefused) || error.failure.reason === 'claim_unavailable') throw error;
      recorded = await this.authorizations.markRefused(key, 'transfer_already_claimed', settlement);
    }
    if (claim || recorded) return claim;
    const existing = await this.authorizations.settledClaim(key, reply.txHash);
    if (!existing || mode === 'recovered') return existing;
    const reused = await this.payments.reuseClaim(existing, purchase);
    return reused.ok ? reused.claim : undefined;
  }

  private staleBefore(): Date {
    return new Date(this.settings.now().getTime() - this.settings.staleAfterMs);
  }

  /** Served only under the reuse rules (`signature` null: its payment id proved the payer); a sent one is waited for. */
  async presentedBefore(
    key: AuthorizationKey,
    signature: string | null,
    purchase: Purchase,
  ): Promise<X402Outcome> {
    const row = await this.authorizations.find(key);
    const used = refused(
      402,
      UPSTREAM_REASONS.nonceAlreadyUsed,
      'this authorization has already paid for something; sign a new one',
    );
    if (!row && signature === null) {
      // Bound to its id a moment ago by another presentation, not claimed yet: that one is settling it.
      return beingSettled('this payment identifier');
    }
    if (!row || (signature !== null && row.signature !== signature.toLowerCase())) return used;
    if (row.state === 'refused') {
      // A row refused as `transfer_already_claimed` (no x402 code) answers as its live refusal did.
      const reason = isX402Reason(row.reason) ? row.reason : UPSTREAM_REASONS.nonceAlreadyUsed;
      return refused(402, reason, 'this authorization was refused before');
    }
    if (row.state === 'submitting' && row.tx_hash) {
      const taken = await this.authorizations.takeOverPending(key, this.staleBefore());
      if (taken) return this.finishPending(taken, purchase);
    }
    if (row.state === 'submitting' || !row.claim_id) {
      return { ...beingSettled('this authorization'), settling: { key, signature: row.signature } };
    }
    const claim = await this.authorizations.claimById(row.claim_id);
    if (!claim) return used;
    const reused = await this.payments.reuseClaim(claim, purchase);
    return reused.ok ? settledBefore(reused.claim) : used;
  }

  /** Waited for as a live caller would, claimed as the recovery pass does; still not included: released and pending. */
  private async finishPending(row: AuthorizationRow, purchase: Purchase): Promise<X402Outcome> {
    const key = keyOfRow(row);
    const claimed: ClaimedAuthorization = { key, claimedAt: row.updated_at };
    const authorization = authorizationOfRow(row);
    const reply = await this.send(authorization, row.signature, this.settings.x402InclusionWaitMs).catch(
      () => undefined,
    );
    if (reply && !reply.ok && RELAYER_REASONS[reply.reason][0] === 402)
      return this.relayerRefused(claimed, reply);
    if (!reply?.ok || reply.status !== 'confirmed') {
      const txHash = reply?.ok ? reply.txHash : row.tx_hash!;
      await this.authorizations.releasePending(claimed, txHash, this.staleBefore());
      return settlementPending(txHash);
    }
    const claim = await this.claimOrUnavailable(
      key,
      { authorization },
      purchaseOfRow(row),
      reply,
      'recovered',
    );
    if (!claim || 'ok' in claim) return claim ?? alreadyPaid(reply.txHash);
    const reused = await this.payments.reuseClaim(claim, purchase);
    return reused.ok ? settledBefore(reused.claim) : alreadyPaid(reply.txHash);
  }

  /** Finishes one authorization whose caller gave up; false when the relayer did not answer (stop this pass). */
  async recover(row: AuthorizationRow): Promise<boolean> {
    const key = keyOfRow(row);
    const authorization = authorizationOfRow(row);
    let reply: RelayerSubmitReply;
    try {
      reply = await this.send(authorization, row.signature, 0);
    } catch {
      return false;
    }
    if (reply.ok && reply.status === 'confirmed') {
      await this.claimTransfer(key, { authorization }, purchaseOfRow(row), reply, 'recovered');
      this.logger.info({ payer: row.payer, txHash: reply.txHash }, 'x402 payment recovered and credited');
    } else if (!reply.ok && RELAYER_REASONS[reply.reason][0] === 402) {
      await this.authorizations.markRefused(key, RELAYER_REASONS[reply.reason][1]);
    } else if (reply.ok) {
      // Sent, not included yet: left for the next presentation (or pass) to take over at once.
      await this.authorizations.releasePending(
        { key, claimedAt: row.updated_at },
        reply.txHash,
        this.staleBefore(),
      );
    } else {
      await this.authorizations.countAttempt(key);
    }
    return true;
  }
}
