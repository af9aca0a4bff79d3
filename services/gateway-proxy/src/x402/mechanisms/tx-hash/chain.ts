import { decodeTransferLog, sameAddress, type TransferLog } from '@paygate/chain';
import { formatUsdc } from '@paygate/money';
import type { PaymentProof } from '@paygate/protocol';
import type { JsonRpcProvider } from 'ethers';
import type { GatewayProxyConfig } from '../../../config';
import { failure, type PaymentFailure } from '../../../payments/failures';

type ChainSettings = Pick<GatewayProxyConfig, 'usdcAddress' | 'escrowAddress' | 'confirmations'>;
type TransactionReceipt = NonNullable<Awaited<ReturnType<JsonRpcProvider['getTransactionReceipt']>>>;
type Verdict =
  | { ok: true; transfer: Pick<TransferLog, 'logIndex' | 'amountMicro'> }
  | { ok: false; failure: PaymentFailure };

const refused = (reason: PaymentFailure['reason'], message: string, details?: Record<string, unknown>) => ({
  ok: false as const,
  failure: failure(reason, message, details),
});

function largestPayingTransfer(
  receipt: TransactionReceipt,
  proof: PaymentProof,
  settings: ChainSettings,
): TransferLog | undefined {
  const transfers = receipt.logs
    .map((log) => decodeTransferLog(log))
    .filter(
      (transfer): transfer is TransferLog =>
        transfer !== null &&
        sameAddress(transfer.token, settings.usdcAddress) &&
        sameAddress(transfer.from, proof.from) &&
        sameAddress(transfer.to, settings.escrowAddress),
    );
  if (transfers.length === 0) return undefined;
  // One tx pays for one thing: the largest matching transfer (the first of equal ones).
  return transfers.reduce((a, b) => (b.amountMicro > a.amountMicro ? b : a));
}

/** The transfer a tx-hash proof names, read from its receipt: succeeded, paid the escrow enough, confirmed enough. */
export class ChainVerifier {
  constructor(
    private readonly provider: JsonRpcProvider,
    private readonly settings: ChainSettings,
  ) {}

  async verifyTransfer(proof: PaymentProof, priceMicro: bigint): Promise<Verdict> {
    let receipt: TransactionReceipt | null;
    let head: number;
    try {
      [receipt, head] = await Promise.all([
        this.provider.getTransactionReceipt(proof.txHash),
        this.provider.getBlockNumber(),
      ]);
    } catch {
      return refused('chain_unavailable', 'the chain RPC did not answer; present the payment again shortly');
    }
    const { txHash } = proof;
    if (!receipt)
      return refused('transfer_not_found', `transaction ${txHash} is not in the chain (not mined yet?)`);
    if (receipt.status !== 1) return refused('transaction_failed', `transaction ${txHash} reverted`);
    const { usdcAddress, escrowAddress, confirmations: required } = this.settings;
    const paid = largestPayingTransfer(receipt, proof, this.settings);
    if (!paid) {
      return refused(
        'transfer_not_found',
        `transaction ${txHash} holds no USDC (${usdcAddress}) Transfer from ${proof.from} to the escrow wallet ${escrowAddress}`,
      );
    }
    if (paid.amountMicro < priceMicro) {
      return refused(
        'insufficient_amount',
        `the transfer is ${formatUsdc(paid.amountMicro)} USDC; the price is ${formatUsdc(priceMicro)} USDC`,
        { paid: formatUsdc(paid.amountMicro), price: formatUsdc(priceMicro) },
      );
    }
    const confirmations = head - receipt.blockNumber + 1;
    if (confirmations < required) {
      return refused(
        'insufficient_confirmations',
        `the transfer has ${confirmations} of the ${required} confirmations required; present it again after more blocks`,
        { confirmations, required },
      );
    }
    return { ok: true, transfer: { logIndex: paid.logIndex, amountMicro: paid.amountMicro } };
  }
}
