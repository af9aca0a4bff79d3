import { formatAddress, makeProvider, usdcAbi } from '@paygate/chain';
import { Interface } from 'ethers';
import { ChainKey } from '../chain-key';
import type { SettlementConfig } from '../config';

const usdc = new Interface(usdcAbi);

export interface TransferReceipt {
  /** 1 = success, 0 = reverted. */
  status: number;
  blockNumber: bigint;
}

/** The escrow wallet on chain: the only place the signing key is used; only `broadcast` sends anything. */
export class EscrowChain extends ChainKey {
  readonly usdcAddress: string;

  constructor(
    options: Pick<
      SettlementConfig,
      'rpcUrl' | 'chainId' | 'usdcAddress' | 'escrowPrivateKey' | 'rpcTimeoutMs'
    >,
  ) {
    const provider = makeProvider(options.rpcUrl, {
      timeoutMs: options.rpcTimeoutMs,
      chainId: options.chainId,
    });
    super(provider, options.chainId, options.escrowPrivateKey);
    this.usdcAddress = formatAddress(options.usdcAddress);
  }

  transferData(to: string, amountMicro: bigint): string {
    return usdc.encodeFunctionData('transfer', [formatAddress(to), amountMicro]);
  }

  /** Escrow's USDC and its consumed nonces at one block: what it can pay out of, without the pool's transfers. */
  async minedState(): Promise<{ balanceMicro: bigint; minedNonce: bigint }> {
    const blockTag = await this.provider.getBlockNumber();
    const [balanceMicro, nonce] = await Promise.all([
      this.usdcBalanceOf(this.address, blockTag),
      this.provider.getTransactionCount(this.address, blockTag),
    ]);
    return { balanceMicro, minedNonce: BigInt(nonce) };
  }

  async usdcBalanceOf(account: string, blockTag?: number): Promise<bigint> {
    const data = usdc.encodeFunctionData('balanceOf', [formatAddress(account)]);
    return BigInt(await this.provider.call({ to: this.usdcAddress, data, blockTag }));
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
  async signTransfer(input: { to: string; amountMicro: bigint; nonce: bigint; gasLimit: bigint }) {
    return this.sign({
      to: this.usdcAddress,
      data: this.transferData(input.to, input.amountMicro),
      nonce: input.nonce,
      gasLimit: input.gasLimit,
      fees: await this.suggestedFees(3n),
    });
  }

  async receipt(txHash: string): Promise<TransferReceipt | null> {
    const receipt = await this.provider.getTransactionReceipt(txHash);
    if (!receipt) return null;
    return { status: receipt.status ?? 0, blockNumber: BigInt(receipt.blockNumber) };
  }
}
