import type { ClaimedVia, RpcReply, RpcRequest } from '@paygate/contracts';
import type { Bus } from './connection';
import { RpcUnavailableError, requestRpc } from './rpc';

/** How long a claimant waits for the ledger's answer before it treats the ledger as unavailable. */
export const LEDGER_CLAIM_TIMEOUT_MS = 3000;

/** A `ledger.claim_transfer` request: the transfer, who claims it, and the payment booked with the claim. */
export type LedgerClaimRequest = RpcRequest<'ledger.claim_transfer'>;
/** The path a transfer is claimed through (x402, verify, checkout, operator_refund). */
export type { ClaimedVia };

/**
 * The ledger's answer to a claim. `ledger_unavailable`: no answer (then `error` is set) or one that is not an
 * outcome; nothing was decided, so nothing may be served or recorded.
 */
export type LedgerClaimResult =
  /** The transfer is this claimant's; `paymentId` the payment booked with its claim (the first request's). */
  | { ok: true; paymentId?: string; transactionId?: string }
  | { ok: false; reason: 'claimed_elsewhere'; claimedBy: ClaimedVia; message: string }
  | { ok: false; reason: 'transfer_reorged' | 'amount_differs' | 'payer_differs'; message: string }
  | { ok: false; reason: 'ledger_unavailable'; message: string; error?: RpcUnavailableError };

/** The one client of `ledger.claim_transfer` (the first claim of an on-chain transfer wins), for every claimant. */
export class LedgerClaimClient {
  constructor(
    private readonly bus: Bus,
    private readonly timeoutMs = LEDGER_CLAIM_TIMEOUT_MS,
  ) {}

  async claim(request: LedgerClaimRequest): Promise<LedgerClaimResult> {
    let reply: RpcReply<'ledger.claim_transfer'>;
    try {
      reply = await requestRpc(this.bus, 'ledger.claim_transfer', request, { timeoutMs: this.timeoutMs });
    } catch (error) {
      if (!(error instanceof RpcUnavailableError)) throw error;
      return { ok: false, reason: 'ledger_unavailable', message: 'the ledger did not answer', error };
    }
    if (reply.ok) {
      return {
        ok: true,
        ...(reply.paymentId ? { paymentId: reply.paymentId } : {}),
        ...(reply.transactionId ? { transactionId: reply.transactionId } : {}),
      };
    }
    const { reason, message } = reply;
    if (reason === 'claimed_elsewhere') {
      return { ok: false, reason, claimedBy: reply.claimedBy.claimedVia, message };
    }
    if (reason === 'invalid_request' || reason === 'internal_error') {
      return { ok: false, reason: 'ledger_unavailable', message: `the ledger could not answer: ${message}` };
    }
    return { ok: false, reason, message };
  }
}
