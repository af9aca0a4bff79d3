import { broadcastSignedTransaction, formatAddress, makeProvider, TRANSFER_TOPIC } from '@paygate/chain';
import type { TransferAuthorization } from '@paygate/contracts';
import {
  Interface,
  type JsonRpcProvider,
  keccak256,
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

/** A hex string of whole bytes, at least one. */
const WHOLE_BYTES = /^0x(?:[0-9a-fA-F]{2})+$/;

/** The gas a simulation may use at most: a payer's check that needs more is refused, not sponsored. */
export const SIMULATION_GAS_CAP = 1_000_000n;

/** The `v` byte of a 65-byte signature; undefined for any other length. */
function vOf(signature: string): number | undefined {
  return signature.length === 132 ? Number.parseInt(signature.slice(130, 132), 16) : undefined;
}

/** Whether a signature's calldata depends on the payer having code (a 65-byte v 27/28 signature's does not). */
export function dependsOnCode(signature: string): boolean {
  const v = vOf(signature);
  return v !== 27 && v !== 28;
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

  /** False for a key of a pool that reads through another key's provider (./pool): destroyed with that one. */
  private readonly ownsProvider: boolean;

  constructor(
    options:
      | { rpcUrl: string; chainId: number; privateKey: string; timeoutMs: number }
      | { provider: JsonRpcProvider; chainId: number; privateKey: string },
  ) {
    this.ownsProvider = !('provider' in options);
    this.provider =
      'provider' in options
        ? options.provider
        : makeProvider(options.rpcUrl, { timeoutMs: options.timeoutMs, chainId: options.chainId });
    this.wallet = new Wallet(options.privateKey);
    this.address = this.wallet.address;
    this.chainId = options.chainId;
  }

  /** Another key of the relayer's pool on the same node, sharing this key's provider (its connections, timeout). */
  withKey(privateKey: string): RelayerChain {
    return new RelayerChain({ provider: this.provider, chainId: this.chainId, privateKey });
  }

  /**
   * Calldata of the submission, or undefined for a signature the token cannot take (never a throw). A 65-byte
   * signature with v 27/28 goes in the v,r,s form (the token passes the same 65 bytes to a contract wallet's
   * ERC-1271 check); any other signature of a contract payer (`payerHasCode`) goes in the bytes form exactly as
   * signed (Safe's v 0/1 or 31/32 mean something to the wallet, and changing them breaks its check); an EOA's v
   * 0/1 is v 27/28, as the token's ecrecover takes it. Whether the payer has code matters only when
   * `dependsOnCode(signature)`.
   */
  callData(
    authorization: TransferAuthorization,
    signature: string,
    payerHasCode: boolean,
  ): string | undefined {
    if (!WHOLE_BYTES.test(signature)) return undefined;
    const a = authorization;
    const args = [
      formatAddress(a.from),
      formatAddress(a.to),
      BigInt(a.value),
      BigInt(a.validAfter),
      BigInt(a.validBefore),
      a.nonce,
    ];
    const v = vOf(signature);
    const vrs = (normalised: number) =>
      token.encodeFunctionData(
        'transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)',
        [...args, normalised, `0x${signature.slice(2, 66)}`, `0x${signature.slice(66, 130)}`],
      );
    if (v === 27 || v === 28) return vrs(v);
    if (payerHasCode) {
      return token.encodeFunctionData(
        'transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)',
        [...args, signature],
      );
    }
    if (v === 0 || v === 1) return vrs(v + 27);
    return undefined;
  }

  /**
   * Simulates the submission from the relayer with the fees it will be signed with (a contract payer may answer
   * differently at gas price 0, which is what a simulation without fees runs at), within SIMULATION_GAS_CAP;
   * throws SimulationError with the token's reason.
   */
  async simulate(tokenAddress: string, data: string, fees: FeeCaps): Promise<bigint> {
    try {
      return await this.provider.estimateGas({
        from: this.address,
        to: tokenAddress,
        data,
        type: 2,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        gasLimit: SIMULATION_GAS_CAP,
      });
    } catch (error) {
      const message = describe(error);
      if (/revert|execution reverted|FiatToken|ERC20|out of gas|gas required exceeds/i.test(message)) {
        throw new SimulationError(refusalOf(message), message);
      }
      throw error; // the RPC itself failed: not the authorization's fault
    }
  }

  /** The keccak256 of the account's code, or null when it has none (an EOA). */
  async codeHash(address: string): Promise<string | null> {
    const code = await this.provider.getCode(formatAddress(address));
    return code === '0x' || code === '0x0' ? null : keccak256(code).toLowerCase();
  }

  /** The account's USDC balance after the given block. */
  async usdcBalanceAt(tokenAddress: string, account: string, block: bigint): Promise<bigint> {
    const data = token.encodeFunctionData('balanceOf', [formatAddress(account)]);
    const result = await this.provider.call({ to: tokenAddress, data, blockTag: toQuantity(block) });
    return token.decodeFunctionResult('balanceOf', result)[0] as bigint;
  }

  /** Whether the authorization was used or canceled as of the given block. */
  async authorizationUsedAt(
    tokenAddress: string,
    payer: string,
    nonce: string,
    block: bigint,
  ): Promise<boolean> {
    const data = token.encodeFunctionData('authorizationState', [formatAddress(payer), nonce]);
    const result = await this.provider.call({ to: tokenAddress, data, blockTag: toQuantity(block) });
    return token.decodeFunctionResult('authorizationState', result)[0] as boolean;
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
    if (this.ownsProvider) this.provider.destroy();
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
