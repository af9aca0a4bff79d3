import { type Bus, LedgerClaimClient, type LedgerClaimRequest } from '@paygate/bus';
import type { Logger } from '@paygate/telemetry';
import { failure, type PaymentFailure } from './failures';

/** The ledger books a verified transfer for this payment before it is served (503 when silent: never served unpaid). */
export class LedgerClaims {
  private readonly client: LedgerClaimClient;

  constructor(
    bus: Bus,
    private readonly logger: Logger,
  ) {
    this.client = new LedgerClaimClient(bus);
  }

  /** undefined when the transfer is this payment's (claimed now or before with the same path and reference). */
  async claim(request: LedgerClaimRequest): Promise<PaymentFailure | undefined> {
    const answer = await this.client.claim(request);
    if (answer.ok) return undefined;
    if (answer.reason === 'claimed_elsewhere') {
      return failure(
        'payment_already_used',
        `payment already used for ${answer.claimedBy}: ${answer.message}`,
        { claimedBy: answer.claimedBy },
      );
    }
    if (answer.reason === 'ledger_unavailable' && answer.error) {
      this.logger.warn({ err: answer.error, txHash: request.txHash }, 'ledger did not answer a claim');
    } else {
      this.logger.error({ answer, txHash: request.txHash }, 'ledger refused a claim unexpectedly');
    }
    return failure('claim_unavailable', 'the ledger could not record this payment; present it again shortly');
  }
}
