import { broadcastSignedTransaction } from '@paygate/chain';
import { type JsonRpcProvider, Transaction, Wallet } from 'ethers';

export interface FeeCaps {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/** A signing key on a chain's provider: its nonces, the head, local signing and sending the signed bytes. */
export class ChainKey {
  private readonly wallet: Wallet;
  readonly address: string;

  constructor(
    readonly provider: JsonRpcProvider,
    readonly chainId: number,
    privateKey: string,
    /** False for a key that reads through another key's provider. */
    private readonly ownsProvider = true,
  ) {
    this.wallet = new Wallet(privateKey);
    this.address = this.wallet.address;
  }

  /** The next nonce the node would accept, counting its mempool. */
  async pendingNonce(): Promise<bigint> {
    return BigInt(await this.provider.getTransactionCount(this.address, 'pending'));
  }

  async minedNonce(): Promise<bigint> {
    return BigInt(await this.provider.getTransactionCount(this.address, 'latest'));
  }

  async blockNumber(): Promise<bigint> {
    return BigInt(await this.provider.getBlockNumber());
  }

  /** The node's fee suggestion, the cap `baseFeeMultiplier` times the base fee above the priority fee. */
  async suggestedFees(baseFeeMultiplier = 2n): Promise<FeeCaps> {
    const fees = await this.provider.getFeeData();
    const priority = fees.maxPriorityFeePerGas ?? 1_000_000n;
    const base = fees.maxFeePerGas ?? fees.gasPrice ?? 1_000_000_000n;
    return { maxFeePerGas: base * baseFeeMultiplier + priority, maxPriorityFeePerGas: priority };
  }

  /** Signs a call (no value) locally: nothing reaches the chain. */
  async sign(call: { to: string; data: string; nonce: bigint; gasLimit: bigint; fees: FeeCaps }) {
    const rawTx = await this.wallet.signTransaction({
      type: 2,
      chainId: this.chainId,
      nonce: Number(call.nonce),
      to: call.to,
      data: call.data,
      value: 0n,
      gasLimit: call.gasLimit,
      maxFeePerGas: call.fees.maxFeePerGas,
      maxPriorityFeePerGas: call.fees.maxPriorityFeePerGas,
    });
    return { rawTx, txHash: Transaction.from(rawTx).hash!.toLowerCase() };
  }

  /** Sends the exact signed bytes; a node that already knows the hash counts as accepted. */
  broadcast(rawTx: string, txHash: string): Promise<void> {
    return broadcastSignedTransaction(this.provider, rawTx, txHash);
  }

  destroy(): void {
    if (this.ownsProvider) this.provider.destroy();
  }
}
