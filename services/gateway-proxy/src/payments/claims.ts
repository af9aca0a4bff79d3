import { type Bus, RpcUnavailableError, requestRpc } from '@paygate/bus';
import type { RpcRequest } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import type { Logger } from '@paygate/telemetry';
import { failure, type PaymentFailure } from './failures';

/** How long a payment waits for the ledger's answer before the caller gets a 503 (nothing served, nothing claimed here). */
export const CLAIM_TIMEOUT_MS = 3000;

export interface TransferToClaim {
  chainId: number;
  txHash: string;
  logIndex: number;
  channel: Extract<RpcRequest<'ledger.claim_transfer'>['channel'], 'x402' | 'verify'>;
  /** The gateway claims per transaction (`<network>:<txHash>`), so every replica asks with the same reference. */
  reference: string;
  payer: string;
  amountMicro: bigint;
}

/**
 * Asks escrow-ledger (`ledger.claim_transfer`) to spend a verified transfer on this gateway payment before it is
 * served or answered valid: a transfer that already paid for a checkout session, another channel or an operator
 * refund is refused (`payment_already_used`); no answer in time is `claim_unavailable` (503, never served unpaid).
 */
export class LedgerClaims {
  constructor(
    private readonly bus: Bus,
    private readonly logger: Logger,
    private readonly timeoutMs = CLAIM_TIMEOUT_MS,
  ) {}

  /** undefined when the transfer is this payment's (claimed now or before by the same channel and reference). */
  async claim(transfer: TransferToClaim): Promise<PaymentFailure | undefined> {
    let reply: Awaited<ReturnType<typeof requestRpc<'ledger.claim_transfer'>>>;
    try {
      reply = await requestRpc(
        this.bus,
        'ledger.claim_transfer',
        {
          chainId: transfer.chainId,
          txHash: transfer.txHash,
          logIndex: transfer.logIndex,
          channel: transfer.channel,
          reference: transfer.reference,
          payer: transfer.payer,
          amount: formatUsdc(transfer.amountMicro),
        },
        { timeoutMs: this.timeoutMs },
      );
    } catch (error) {
      if (!(error instanceof RpcUnavailableError)) throw error;
      this.logger.warn({ err: error, txHash: transfer.txHash }, 'ledger did not answer a claim');
      return unavailable();
    }
    if (reply.ok) return undefined;
    if (reply.reason === 'claimed_elsewhere') {
      return failure(
        'payment_already_used',
        `payment already used for ${reply.claimedBy.channel}: ${reply.message}`,
        { claimedBy: reply.claimedBy.channel },
      );
    }
    this.logger.error({ reply, txHash: transfer.txHash }, 'ledger refused a claim unexpectedly');
    return unavailable();
  }
}

const unavailable = () =>
  failure('claim_unavailable', 'the ledger could not record this payment; present it again shortly');
