import {
  type Bus,
  type ClaimedVia,
  LEDGER_CLAIM_TIMEOUT_MS,
  LedgerClaimClient,
  type LedgerClaimRequest,
  type LedgerClaimResult,
} from '@paygate/bus';
import { HttpError } from '@paygate/http';
import { formatUsdcExact } from '@paygate/money';
import type { TransferRow } from '../db';

/** The transfer as checkout observed it. */
type TransferToClaim = Pick<
  TransferRow,
  'chain_id' | 'tx_hash' | 'log_index' | 'from_address' | 'amount_micro'
>;

/** The ledger's decision: an unavailable ledger is thrown instead (see LedgerClaims.claim). */
type ClaimAnswer = Exclude<LedgerClaimResult, { reason: 'ledger_unavailable' }>;

/**
 * Spends a transfer at the ledger on a session (with its payment) or an operator refund before checkout records
 * it. An unavailable ledger throws a 503: a route answers it, a consumer's event is redelivered.
 */
export class LedgerClaims {
  private readonly client: LedgerClaimClient;

  constructor(bus: Bus) {
    this.client = new LedgerClaimClient(bus, LEDGER_CLAIM_TIMEOUT_MS);
  }

  async claim(
    transfer: TransferToClaim,
    claimedVia: ClaimedVia,
    reference: string,
    { underpaidSessionId, payment }: Pick<LedgerClaimRequest, 'underpaidSessionId' | 'payment'> = {},
  ): Promise<ClaimAnswer> {
    const answer = await this.client.claim({
      chainId: transfer.chain_id,
      txHash: transfer.tx_hash,
      logIndex: transfer.log_index,
      claimedVia,
      reference,
      payer: transfer.from_address,
      amount: formatUsdcExact(transfer.amount_micro),
      ...(underpaidSessionId ? { underpaidSessionId } : {}),
      ...(payment ? { payment } : {}),
    });
    if (!answer.ok && answer.reason === 'ledger_unavailable') {
      const retry = answer.error ? '; retry shortly' : '';
      throw new HttpError(503, 'ledger_unavailable', `${answer.message}${retry}`);
    }
    return answer;
  }
}
