import { broadcastSignedTransaction, formatAddress, makeProvider, usdcAbi } from '@paygate/chain';
import { Interface, type JsonRpcProvider, Transaction, Wallet } from 'ethers';

const usdc = new Interface(usdcAbi);

export interface SignedTransfer {
  rawTx: string;
  txHash: string;
}

export interface TransferReceipt {
  /** 1 = success, 0 = reverted. */
  status: number;
  blockNumber: bigint;
}

/**
 * The escrow wallet on chain: the only place the signing key is used. Every call is a JSON-RPC request with
 * the configured timeout. Signing is local and has no side effect; only `broadcast` reaches the network.
 */
export class EscrowChain {
  readonly provider: JsonRpcProvider;
  private readonly wallet: Wallet;
  readonly address: string;
  readonly usdcAddress: string;

  constructor(options: {
    rpcUrl: string;
    chainId: number;
    usdcAddress: string;
    privateKey: string;
    timeoutMs: number;
  }) {
    this.provider = makeProvider(options.rpcUrl, { timeoutMs: options.timeoutMs, chainId: options.chainId });
    this.wallet = new Wallet(options.privateKey);
    this.address = this.wallet.address;
    this.usdcAddress = formatAddress(options.usdcAddress);
    this.chainId = options.chainId;
  }
  readonly chainId: number;

  transferData(to: string, amountMicro: bigint): string {
    return usdc.encodeFunctionData('transfer', [formatAddress(to), amountMicro]);
  }

  /** The next nonce the node would accept from escrow, counting its mempool. */
  async pendingNonce(): Promise<bigint> {
    return BigInt(await this.provider.getTransactionCount(this.address, 'pending'));
  }

  /** Escrow's nonces consumed by mined transactions (its `latest` transaction count). */
  async minedNonce(): Promise<bigint> {
    return BigInt(await this.provider.getTransactionCount(this.address, 'latest'));
  }

  /**
   * Escrow's USDC and its consumed nonces (mined transactions) at one block: what it can pay out of. A transfer
   * still in the pool, into escrow or out of it, is in neither.
   */
  async minedState(): Promise<{ balanceMicro: bigint; minedNonce: bigint }> {
    const blockTag = await this.provider.getBlockNumber();
    const [balance, nonce] = await Promise.all([
      this.provider.call({
        to: this.usdcAddress,
        data: usdc.encodeFunctionData('balanceOf', [this.address]),
        blockTag,
      }),
      this.provider.getTransactionCount(this.address, blockTag),
    ]);
    return { balanceMicro: BigInt(balance), minedNonce: BigInt(nonce) };
  }

  /** Simulates the transfer; throws (for example on insufficient USDC) without spending a nonce. */
  async estimateTransferGas(to: string, amountMicro: bigint): Promise<bigint> {
    return this.provider.estimateGas({
      from: this.address,
      to: this.usdcAddress,
      data: this.transferData(to, amountMicro),
    });
  }

  /**
   * Signs a USDC transfer with an explicit nonce. The fee cap is generous (3x the current suggestion) because
   * a recorded transaction is only ever rebroadcast, never re-signed with a higher fee.
   */
  async signTransfer(input: {
    to: string;
    amountMicro: bigint;
    nonce: bigint;
    gasLimit: bigint;
  }): Promise<SignedTransfer> {
    const fees = await this.provider.getFeeData();
    const priority = fees.maxPriorityFeePerGas ?? 1_000_000n;
    const maxFee = (fees.maxFeePerGas ?? fees.gasPrice ?? 1_000_000_000n) * 3n + priority;
    const rawTx = await this.wallet.signTransaction({
      type: 2,
      chainId: this.chainId,
      nonce: Number(input.nonce),
      to: this.usdcAddress,
      data: this.transferData(input.to, input.amountMicro),
      value: 0n,
      gasLimit: input.gasLimit,
      maxFeePerGas: maxFee,
      maxPriorityFeePerGas: priority,
    });
    return { rawTx, txHash: Transaction.from(rawTx).hash!.toLowerCase() };
  }

  /** Sends the exact signed bytes; a node that already knows the hash counts as accepted. */
  broadcast(rawTx: string, txHash: string): Promise<void> {
    return broadcastSignedTransaction(this.provider, rawTx, txHash);
  }

  async receipt(txHash: string): Promise<TransferReceipt | null> {
    const receipt = await this.provider.getTransactionReceipt(txHash);
    if (!receipt) return null;
    return { status: receipt.status ?? 0, blockNumber: BigInt(receipt.blockNumber) };
  }

  async blockNumber(): Promise<bigint> {
    return BigInt(await this.provider.getBlockNumber());
  }

  destroy(): void {
    this.provider.destroy();
  }
}
