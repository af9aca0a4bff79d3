import { decodeTransferLog, sameAddress, type TransferLog } from '@paygate/chain';
import { formatUsdc } from '@paygate/money';
import type { PaymentProof } from '@paygate/protocol';
import type { JsonRpcProvider } from 'ethers';
import { failure, type PaymentFailure } from './failures';

export interface VerifiedTransfer {
  logIndex: number;
  amountMicro: bigint;
  blockNumber: number;
  confirmations: number;
}

export interface ChainSettings {
  usdcAddress: string;
  escrowAddress: string;
  confirmations: number;
}

/**
 * Proves a payment on chain: the transaction's receipt must hold a USDC Transfer log from the payer to the
 * escrow wallet of at least the price, in a successful transaction with enough confirmations.
 */
export class ChainVerifier {
  constructor(
    private readonly provider: JsonRpcProvider,
    private readonly settings: ChainSettings,
  ) {}

  async verifyTransfer(
    proof: PaymentProof,
    priceMicro: bigint,
  ): Promise<{ ok: true; transfer: VerifiedTransfer } | { ok: false; failure: PaymentFailure }> {
    let receipt: Awaited<ReturnType<JsonRpcProvider['getTransactionReceipt']>>;
    let head: number;
    try {
      [receipt, head] = await Promise.all([
        this.provider.getTransactionReceipt(proof.txHash),
        this.provider.getBlockNumber(),
      ]);
    } catch {
      return {
        ok: false,
        failure: failure(
          'chain_unavailable',
          'the chain RPC did not answer; present the payment again shortly',
        ),
      };
    }
    if (!receipt) {
      return {
        ok: false,
        failure: failure(
          'transfer_not_found',
          `transaction ${proof.txHash} is not in the chain (not mined yet?)`,
        ),
      };
    }
    if (receipt.status !== 1) {
      return { ok: false, failure: failure('transaction_failed', `transaction ${proof.txHash} reverted`) };
    }
    const transfers = receipt.logs
      .map((log) => decodeTransferLog(log))
      .filter(
        (transfer): transfer is TransferLog =>
          transfer !== null &&
          sameAddress(transfer.token, this.settings.usdcAddress) &&
          sameAddress(transfer.from, proof.from) &&
          sameAddress(transfer.to, this.settings.escrowAddress),
      );
    if (transfers.length === 0) {
      return {
        ok: false,
        failure: failure(
          'transfer_not_found',
          `transaction ${proof.txHash} holds no USDC (${this.settings.usdcAddress}) Transfer from ${proof.from} to the escrow wallet ${this.settings.escrowAddress}`,
        ),
      };
    }
    // The largest matching transfer pays; one tx pays for one thing.
    const best = transfers.reduce((a, b) => (b.amountMicro > a.amountMicro ? b : a));
    const amountMicro = best.amountMicro;
    if (amountMicro < priceMicro) {
      return {
        ok: false,
        failure: failure(
          'insufficient_amount',
          `the transfer is ${formatUsdc(amountMicro)} USDC; the price is ${formatUsdc(priceMicro)} USDC`,
          { paid: formatUsdc(amountMicro), price: formatUsdc(priceMicro) },
        ),
      };
    }
    const confirmations = head - receipt.blockNumber + 1;
    if (confirmations < this.settings.confirmations) {
      return {
        ok: false,
        failure: failure(
          'insufficient_confirmations',
          `the transfer has ${confirmations} of the ${this.settings.confirmations} confirmations required; present it again after more blocks`,
          { confirmations, required: this.settings.confirmations },
        ),
      };
    }
    return {
      ok: true,
      transfer: { logIndex: best.logIndex, amountMicro, blockNumber: receipt.blockNumber, confirmations },
    };
  }
}
