import { broadcastSignedTransaction, formatAddress, makeProvider, usdcAbi } from '@paygate/chain';
import { Interface, type JsonRpcProvider, Transaction, Wallet } from 'ethers';

const usdc = new Interface(usdcAbi);

export interface TransferReceipt {
  /** 1 = success, 0 = reverted. */
  status: number;
  blockNumber: bigint;
}

/** The escrow wallet on chain: the only place the signing key is used; only `broadcast` sends anything. */
export class EscrowChain {
  readonly provider: JsonRpcProvider;
  private readonly wallet: Wallet;
  readonly address: string;
  readonly usdcAddress: string;
  readonly chainId: number;

  constructor(options: {
    rpcUrl: string;
    chainId: number;
    usdcAddress: string;
    escrowPrivateKey: string;
    rpcTimeoutMs: number;
  }) {
    this.provider = makeProvider(options.rpcUrl, {
      timeoutMs: options.rpcTimeoutMs,
      chainId: options.chainId,
    });
    this.wallet = new Wallet(options.escrowPrivateKey);
    this.address = this.wallet.address;
    this.usdcAddress = formatAddress(options.usdcAddress);
    this.chainId = options.chainId;
  }

  transferData(to: string, amountMicro: bigint): string {
    return usdc.encodeFunctionData('transfer', [formatAddress(to), amountMicro]);
  }

  async pendingNonce(): Promise<bigint> {
    return BigInt(await this.provider.getTransactionCount(this.address, 'pending'));
  }

  async minedNonce(): Promise<bigint> {
    return BigInt(await this.provider.getTransactionCount(this.address, 'latest'));
  }

  /** Escrow's USDC and its consumed nonces at one block: what it can pay out of, without the pool's transfers. */
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

  /** The fee cap is generous (3x the suggestion): a recorded transaction is never re-signed with a higher fee. */
  async signTransfer(input: {
    to: string;
    amountMicro: bigint;
    nonce: bigint;
    gasLimit: bigint;
  }): Promise<{ rawTx: string; txHash: string }> {
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
