import {
  type Bus,
  type ClaimedVia,
  LEDGER_CLAIM_TIMEOUT_MS,
  LedgerClaimClient,
  type LedgerClaimRequest,
  type LedgerClaimResult,
} from '@paygate/bus';
import { formatUsdc } from '@paygate/money';
import type { Logger } from '@paygate/telemetry';
import { failure, type PaymentFailure } from './failures';

export interface TransferToClaim {
  chainId: number;
  txHash: string;
  logIndex: number;
  claimedVia: Extract<ClaimedVia, 'x402' | 'verify'>;
  /** The gateway claims per transaction (`<network>:<txHash>`), so every replica asks with the same reference. */
  reference: string;
  payer: string;
  amountMicro: bigint;
  /** The payment the ledger books with the claim (its payment.confirmed is the ledger's). */
  payment: NonNullable<LedgerClaimRequest['payment']>;
}

/**
 * The gateway's side of the shared ledger claim client: a verified transfer is spent on this gateway payment, and
 * the payment booked (held for its seller), before it is served or answered valid. A transfer that already paid for a checkout session, was claimed through
 * another path or by an operator refund is refused (`payment_already_used`); an unavailable ledger is
 * `claim_unavailable` (503, never served unpaid).
 */
export class LedgerClaims {
  private readonly client: LedgerClaimClient;

  constructor(
    bus: Bus,
    private readonly logger: Logger,
    timeoutMs = LEDGER_CLAIM_TIMEOUT_MS,
  ) {
    this.client = new LedgerClaimClient(bus, timeoutMs);
  }

  /** undefined when the transfer is this payment's (claimed now or before with the same path and reference). */
  async claim(transfer: TransferToClaim): Promise<PaymentFailure | undefined> {
    const answer = await this.client.claim({
      chainId: transfer.chainId,
      txHash: transfer.txHash,
      logIndex: transfer.logIndex,
      claimedVia: transfer.claimedVia,
      reference: transfer.reference,
      payer: transfer.payer,
      amount: formatUsdc(transfer.amountMicro),
      payment: transfer.payment,
    });
    return this.paymentFailureOf(answer, transfer.txHash);
  }

  private paymentFailureOf(answer: LedgerClaimResult, txHash: string): PaymentFailure | undefined {
    if (answer.ok) return undefined;
    if (answer.reason === 'claimed_elsewhere') {
      return failure(
        'payment_already_used',
        `payment already used for ${answer.claimedBy}: ${answer.message}`,
        {
          claimedBy: answer.claimedBy,
        },
      );
    }
    if (answer.reason === 'ledger_unavailable' && answer.error) {
      this.logger.warn({ err: answer.error, txHash }, 'ledger did not answer a claim');
    } else {
      this.logger.error({ answer, txHash }, 'ledger refused a claim unexpectedly');
    }
    return failure('claim_unavailable', 'the ledger could not record this payment; present it again shortly');
  }
}
