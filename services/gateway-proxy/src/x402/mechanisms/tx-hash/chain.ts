import { decodeTransferLog, sameAddress, type TransferLog } from '@paygate/chain';
import { formatUsdc } from '@paygate/money';
import type { PaymentProof } from '@paygate/protocol';
import type { JsonRpcProvider } from 'ethers';
import { failure, type PaymentFailure } from '../../../payments/failures';

export interface ChainSettings {
  usdcAddress: string;
  escrowAddress: string;
  confirmations: number;
}

type TransactionReceipt = NonNullable<Awaited<ReturnType<JsonRpcProvider['getTransactionReceipt']>>>;

export interface TransferEvidence {
  proof: PaymentProof;
  priceMicro: bigint;
  settings: ChainSettings;
  receipt: TransactionReceipt;
  head: number;
  /** Decoded on first use. */
  payingTransfer(): TransferLog | undefined;
}

export interface TransferCheck {
  name: string;
  run(evidence: TransferEvidence): PaymentFailure | undefined;
}

const confirmationsOf = (evidence: TransferEvidence): number =>
  evidence.head - evidence.receipt.blockNumber + 1;

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

export const TRANSFER_CHECKS: readonly TransferCheck[] = [
  {
    name: 'transaction succeeded',
    run: ({ proof, receipt }) =>
      receipt.status !== 1
        ? failure('transaction_failed', `transaction ${proof.txHash} reverted`)
        : undefined,
  },
  {
    name: 'a USDC Transfer from the payer reached the escrow wallet',
    run: ({ proof, settings, payingTransfer }) =>
      payingTransfer()
        ? undefined
        : failure(
            'transfer_not_found',
            `transaction ${proof.txHash} holds no USDC (${settings.usdcAddress}) Transfer from ${proof.from} to the escrow wallet ${settings.escrowAddress}`,
          ),
  },
  {
    name: 'the transfer covers the price',
    run: ({ priceMicro, payingTransfer }) => {
      const paid = payingTransfer();
      if (!paid || paid.amountMicro >= priceMicro) return undefined;
      return failure(
        'insufficient_amount',
        `the transfer is ${formatUsdc(paid.amountMicro)} USDC; the price is ${formatUsdc(priceMicro)} USDC`,
        { paid: formatUsdc(paid.amountMicro), price: formatUsdc(priceMicro) },
      );
    },
  },
  {
    name: 'the transfer has enough confirmations',
    run: (evidence) => {
      const confirmations = confirmationsOf(evidence);
      const required = evidence.settings.confirmations;
      if (confirmations >= required) return undefined;
      return failure(
        'insufficient_confirmations',
        `the transfer has ${confirmations} of the ${required} confirmations required; present it again after more blocks`,
        { confirmations, required },
      );
    },
  },
];

function transferEvidence(
  proof: PaymentProof,
  priceMicro: bigint,
  settings: ChainSettings,
  receipt: TransactionReceipt,
  head: number,
): TransferEvidence {
  let decoded: { transfer: TransferLog | undefined } | undefined;
  return {
    proof,
    priceMicro,
    settings,
    receipt,
    head,
    payingTransfer: () => {
      decoded ??= { transfer: largestPayingTransfer(receipt, proof, settings) };
      return decoded.transfer;
    },
  };
}

export class ChainVerifier {
  constructor(
    private readonly provider: JsonRpcProvider,
    private readonly settings: ChainSettings,
  ) {}

  async verifyTransfer(
    proof: PaymentProof,
    priceMicro: bigint,
  ): Promise<
    | { ok: true; transfer: Pick<TransferLog, 'logIndex' | 'amountMicro'> }
    | { ok: false; failure: PaymentFailure }
  > {
    const chain = await this.readReceiptAndHead(proof.txHash);
    if (!chain) {
      return {
        ok: false,
        failure: failure(
          'chain_unavailable',
          'the chain RPC did not answer; present the payment again shortly',
        ),
      };
    }
    if (!chain.receipt) {
      return {
        ok: false,
        failure: failure(
          'transfer_not_found',
          `transaction ${proof.txHash} is not in the chain (not mined yet?)`,
        ),
      };
    }
    const evidence = transferEvidence(proof, priceMicro, this.settings, chain.receipt, chain.head);
    for (const check of TRANSFER_CHECKS) {
      const refused = check.run(evidence);
      if (refused) return { ok: false, failure: refused };
    }
    const { logIndex, amountMicro } = evidence.payingTransfer()!;
    return { ok: true, transfer: { logIndex, amountMicro } };
  }

  private async readReceiptAndHead(
    txHash: string,
  ): Promise<{ receipt: TransactionReceipt | null; head: number } | undefined> {
    try {
      const [receipt, head] = await Promise.all([
        this.provider.getTransactionReceipt(txHash),
        this.provider.getBlockNumber(),
      ]);
      return { receipt, head };
    } catch {
      return undefined;
    }
  }
}
