import { broadcastSignedTransaction, formatAddress, makeProvider, TRANSFER_TOPIC } from '@paygate/chain';
import type { TransferAuthorization } from '@paygate/contracts';
import {
  Interface,
  type JsonRpcProvider,
  Signature,
  Transaction,
  toQuantity,
  Wallet,
  zeroPadValue,
} from 'ethers';

const token = new Interface([
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)',
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)',
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'function balanceOf(address account) view returns (uint256)',
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
]);
const AUTHORIZATION_USED_TOPIC = token.getEvent('AuthorizationUsed')!.topicHash;

export interface FeeCaps {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/** What the relayer reads of a receipt: a block's receipts (eth_getBlockReceipts) are read as they come. */
export interface ReceiptFacts {
  blockNumber: bigint;
  succeeded: boolean;
  logs: ReadonlyArray<{ topics: readonly string[]; index: number }>;
}

export interface ExecutedTransfer {
  txHash: string;
  blockNumber: bigint;
  /** The USDC Transfer log (payer → escrow) the authorization produced. */
  logIndex: number;
  reverted: boolean;
}

/** Why the token would refuse the authorization, read from the simulation's revert reason. */
export type SimulationRefusal =
  | 'insufficient_funds'
  | 'invalid_signature'
  | 'authorization_expired'
  | 'authorization_not_yet_valid'
  | 'nonce_already_used'
  | 'simulation_failed';

export class SimulationError extends Error {
  constructor(
    readonly reason: SimulationRefusal,
    message: string,
  ) {
    super(message);
    this.name = 'SimulationError';
  }
}

function refusalOf(message: string): SimulationRefusal {
  if (/exceeds balance/i.test(message)) return 'insufficient_funds';
  if (/invalid signature/i.test(message)) return 'invalid_signature';
  if (/is expired/i.test(message)) return 'authorization_expired';
  if (/not yet valid/i.test(message)) return 'authorization_not_yet_valid';
  if (/used or canceled/i.test(message)) return 'nonce_already_used';
  return 'simulation_failed';
}

function describe(error: unknown): string {
  const e = error as { shortMessage?: string; reason?: string; message?: string };
  return String(e?.reason ?? e?.shortMessage ?? e?.message ?? error).slice(0, 300);
}

/**
 * The relayer's key on chain: it pays gas for `transferWithAuthorization` and holds nothing else (never USDC,
 * never the escrow key). Every call is a JSON-RPC request with the configured timeout; signing is local.
 */
export class RelayerChain {
  readonly provider: JsonRpcProvider;
  private readonly wallet: Wallet;
  readonly address: string;
  readonly chainId: number;

  constructor(options: { rpcUrl: string; chainId: number; privateKey: string; timeoutMs: number }) {
    this.provider = makeProvider(options.rpcUrl, { timeoutMs: options.timeoutMs, chainId: options.chainId });
    this.wallet = new Wallet(options.privateKey);
    this.address = this.wallet.address;
    this.chainId = options.chainId;
  }

  /** Calldata: the v,r,s form for a 65-byte EOA signature (every USDC version), the bytes form otherwise (ERC-1271). */
  callData(authorization: TransferAuthorization, signature: string): string {
    const a = authorization;
    const args = [
      formatAddress(a.from),
      formatAddress(a.to),
      BigInt(a.value),
      BigInt(a.validAfter),
      BigInt(a.validBefore),
      a.nonce,
    ];
    if (signature.length === 132) {
      const sig = Signature.from(signature);
      return token.encodeFunctionData(
        'transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)',
        [...args, sig.v, sig.r, sig.s],
      );
    }
    return token.encodeFunctionData(
      'transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)',
      [...args, signature],
    );
  }

  /** Simulates the submission from the relayer; throws SimulationError with the token's reason. */
  async simulate(tokenAddress: string, data: string): Promise<bigint> {
    try {
      return await this.provider.estimateGas({ from: this.address, to: tokenAddress, data });
    } catch (error) {
      const message = describe(error);
      if (/revert|execution reverted|FiatToken|ERC20/i.test(message)) {
        throw new SimulationError(refusalOf(message), message);
      }
      throw error; // the RPC itself failed: not the authorization's fault
    }
  }

  async authorizationUsed(tokenAddress: string, payer: string, nonce: string): Promise<boolean> {
    const data = token.encodeFunctionData('authorizationState', [formatAddress(payer), nonce]);
    const result = await this.provider.call({ to: tokenAddress, data });
    return token.decodeFunctionResult('authorizationState', result)[0] as boolean;
  }

  async balanceWei(): Promise<bigint> {
    return this.provider.getBalance(this.address);
  }

  async pendingNonce(): Promise<bigint> {
    return BigInt(await this.provider.getTransactionCount(this.address, 'pending'));
  }

  /** The relayer's nonces consumed by mined transactions (its `latest` transaction count). */
  async minedNonce(): Promise<bigint> {
    return BigInt(await this.provider.getTransactionCount(this.address, 'latest'));
  }

  async blockNumber(): Promise<bigint> {
    return BigInt(await this.provider.getBlockNumber());
  }

  async blockTimestampSec(block: bigint): Promise<bigint> {
    const found = await this.provider.getBlock(block);
    if (!found) throw new Error(`block ${block} not found`);
    return BigInt(found.timestamp);
  }

  async suggestedFees(): Promise<FeeCaps> {
    const fees = await this.provider.getFeeData();
    const priority = fees.maxPriorityFeePerGas ?? 1_000_000n;
    const base = fees.maxFeePerGas ?? fees.gasPrice ?? 1_000_000_000n;
    return { maxFeePerGas: base * 2n + priority, maxPriorityFeePerGas: priority };
  }

  async sign(input: {
    tokenAddress: string;
    data: string;
    nonce: bigint;
    gasLimit: bigint;
    fees: FeeCaps;
  }): Promise<{ rawTx: string; txHash: string }> {
    const rawTx = await this.wallet.signTransaction({
      type: 2,
      chainId: this.chainId,
      nonce: Number(input.nonce),
      to: input.tokenAddress,
      data: input.data,
      value: 0n,
      gasLimit: input.gasLimit,
      maxFeePerGas: input.fees.maxFeePerGas,
      maxPriorityFeePerGas: input.fees.maxPriorityFeePerGas,
    });
    return { rawTx, txHash: Transaction.from(rawTx).hash!.toLowerCase() };
  }

  /** Sends the exact signed bytes; a node that already knows the hash counts as accepted. */
  broadcast(rawTx: string, txHash: string): Promise<void> {
    return broadcastSignedTransaction(this.provider, rawTx, txHash);
  }

  /** The receipt of a transaction that ran the authorization, with the payer → `to` Transfer log found in it. */
  async executed(txHash: string, payer: string, to: string): Promise<ExecutedTransfer | null> {
    const receipt = await this.provider.getTransactionReceipt(txHash);
    if (!receipt) return null;
    return executedIn(
      txHash,
      { blockNumber: BigInt(receipt.blockNumber), succeeded: receipt.status === 1, logs: receipt.logs },
      payer,
      to,
    );
  }

  /**
   * Every receipt of one block by transaction hash (lowercase), in one `eth_getBlockReceipts`: the callers
   * waiting on a new head look their transactions up here together instead of one receipt read each.
   */
  async blockReceipts(block: bigint): Promise<Map<string, ReceiptFacts>> {
    const raw = (await this.provider.send('eth_getBlockReceipts', [toQuantity(block)])) as Array<{
      transactionHash: string;
      blockNumber: string;
      status?: string | null;
      logs: Array<{ topics: string[]; logIndex: string }>;
    }> | null;
    const out = new Map<string, ReceiptFacts>();
    for (const receipt of raw ?? []) {
      out.set(receipt.transactionHash.toLowerCase(), {
        blockNumber: BigInt(receipt.blockNumber),
        succeeded: receipt.status != null && BigInt(receipt.status) === 1n,
        logs: receipt.logs.map((log) => ({ topics: log.topics, index: Number(BigInt(log.logIndex)) })),
      });
    }
    return out;
  }

  /**
   * The transaction that used the authorization when it was not ours (someone else submitted the same signed
   * authorization): the AuthorizationUsed log of (payer, nonce), searched in the recent `lookbackBlocks`.
   */
  async findAuthorizationUse(
    tokenAddress: string,
    payer: string,
    nonce: string,
    lookbackBlocks: number,
  ): Promise<string | null> {
    const head = await this.provider.getBlockNumber();
    const logs = await this.provider.getLogs({
      address: tokenAddress,
      topics: [AUTHORIZATION_USED_TOPIC, zeroPadValue(formatAddress(payer), 32), nonce],
      fromBlock: Math.max(0, head - lookbackBlocks),
      toBlock: head,
    });
    return logs[0]?.transactionHash.toLowerCase() ?? null;
  }

  destroy(): void {
    this.provider.destroy();
  }
}

/** A transaction's receipt read for the authorization: its payer → `to` Transfer log, reverted without one. */
export function executedIn(
  txHash: string,
  receipt: ReceiptFacts,
  payer: string,
  to: string,
): ExecutedTransfer {
  const fromTopic = zeroPadValue(formatAddress(payer), 32).toLowerCase();
  const toTopic = zeroPadValue(formatAddress(to), 32).toLowerCase();
  const log = receipt.logs.find(
    (l) =>
      l.topics[0]?.toLowerCase() === TRANSFER_TOPIC &&
      l.topics[1]?.toLowerCase() === fromTopic &&
      l.topics[2]?.toLowerCase() === toTopic,
  );
  return {
    txHash: txHash.toLowerCase(),
    blockNumber: receipt.blockNumber,
    logIndex: log?.index ?? -1,
    reverted: !receipt.succeeded || !log,
  };
}
