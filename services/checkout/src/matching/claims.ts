import { type Bus, RpcUnavailableError, requestRpc } from '@paygate/bus';
import type { RpcRequest } from '@paygate/contracts';
import { HttpError } from '@paygate/http';
import { formatUsdcExact } from '@paygate/money';
import type { TransferRow } from '../db';

/** How long checkout waits for the ledger's claim answer (an operator gets 503; an event is redelivered). */
export const CLAIM_TIMEOUT_MS = 3000;

type ClaimChannel = RpcRequest<'ledger.claim_transfer'>['channel'];
/** The transfer as checkout observed it. */
export type TransferToClaim = Pick<
  TransferRow,
  'chain_id' | 'tx_hash' | 'log_index' | 'from_address' | 'amount_micro'
>;

export type ClaimAnswer =
  | { ok: true }
  | { ok: false; reason: 'claimed_elsewhere'; claimedBy: ClaimChannel; message: string }
  | { ok: false; reason: 'transfer_reorged' | 'amount_differs' | 'payer_differs'; message: string };

/**
 * Asks escrow-ledger (`ledger.claim_transfer`) to spend a transfer on a checkout session (`checkout`, reference
 * the session id) or on an operator refund (`operator_refund`, reference checkout's transfer id) before checkout
 * records it. No answer in time throws a 503 HttpError: a route answers it, a consumer's event is redelivered.
 */
export class LedgerClaims {
  constructor(
    private readonly bus: Bus,
    private readonly timeoutMs = CLAIM_TIMEOUT_MS,
  ) {}

  async claim(
    transfer: TransferToClaim,
    channel: ClaimChannel,
    reference: string,
    underpaidSessionId?: string,
  ): Promise<ClaimAnswer> {
    let reply: Awaited<ReturnType<typeof requestRpc<'ledger.claim_transfer'>>>;
    try {
      reply = await requestRpc(
        this.bus,
        'ledger.claim_transfer',
        {
          chainId: transfer.chain_id,
          txHash: transfer.tx_hash,
          logIndex: transfer.log_index,
          channel,
          reference,
          payer: transfer.from_address,
          amount: formatUsdcExact(transfer.amount_micro),
          ...(underpaidSessionId ? { underpaidSessionId } : {}),
        },
        { timeoutMs: this.timeoutMs },
      );
    } catch (error) {
      if (!(error instanceof RpcUnavailableError)) throw error;
      throw new HttpError(503, 'ledger_unavailable', 'the ledger did not answer; retry shortly');
    }
    if (reply.ok) return { ok: true };
    if (reply.reason === 'claimed_elsewhere') {
      return { ok: false, reason: reply.reason, claimedBy: reply.claimedBy.channel, message: reply.message };
    }
    if (reply.reason === 'invalid_request' || reply.reason === 'internal_error') {
      throw new HttpError(503, 'ledger_unavailable', `the ledger could not answer: ${reply.message}`);
    }
    return { ok: false, reason: reply.reason, message: reply.message };
  }
}
