import { addressToTopic, formatAddress, makeProvider, TRANSFER_TOPIC } from '@paygate/chain';
import type { TransferAuthorization } from '@paygate/contracts';
import { Interface, keccak256, toQuantity } from 'ethers';
import { ChainKey, type FeeCaps } from '../chain-key';
import { BlockNotFoundError, describe } from '../errors';

const token = new Interface([
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)',
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)',
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'function balanceOf(address account) view returns (uint256)',
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
]);
const AUTHORIZATION_USED_TOPIC = token.getEvent('AuthorizationUsed')!.topicHash;

export type { FeeCaps } from '../chain-key';

/** What the relayer reads of a receipt. */
export interface ReceiptFacts {
  blockNumber: bigint;
  succeeded: boolean;
  logs: ReadonlyArray<{ topics: readonly string[]; index: number }>;
}

export type ExecutedTransfer = ReturnType<typeof executedIn>;

/** The token's revert reasons a simulation names, and the refusal each is. */
const REFUSALS = [
  [/exceeds balance/i, 'insufficient_funds'],
  [/invalid signature/i, 'invalid_signature'],
  [/is expired/i, 'authorization_expired'],
  [/not yet valid/i, 'authorization_not_yet_valid'],
  [/used or canceled/i, 'nonce_already_used'],
] as const;
type SimulationRefusal = (typeof REFUSALS)[number][1] | 'simulation_failed';

export class SimulationError extends Error {
  override name = 'SimulationError';
  constructor(
    readonly reason: SimulationRefusal,
    message: string,
  ) {
    super(message);
  }
}

const refusalOf = (message: string): SimulationRefusal =>
  REFUSALS.find(([pattern]) => pattern.test(message))?.[1] ?? 'simulation_failed';

const WHOLE_BYTES = /^0x(?:[0-9a-fA-F]{2})+$/;

/** A payer's check that needs more gas than this is refused, not sponsored. */
const SIMULATION_GAS_CAP = 1_000_000n;

function vOf(signature: string): number | undefined {
  return signature.length === 132 ? Number.parseInt(signature.slice(130, 132), 16) : undefined;
}

/** Whether a signature's calldata depends on the payer having code (a 65-byte v 27/28 signature's does not). */
export function dependsOnCode(signature: string): boolean {
  const v = vOf(signature);
  return v !== 27 && v !== 28;
}

/** The relayer's key on chain: it pays gas for `transferWithAuthorization` and holds nothing else. */
export class RelayerChain extends ChainKey {
  /** The pool's keys, sharing one provider (its connections, timeout), which the first key destroys. */
  static pool(rpc: { rpcUrl: string; chainId: number; rpcTimeoutMs: number }, keys: readonly string[]) {
    const provider = makeProvider(rpc.rpcUrl, { timeoutMs: rpc.rpcTimeoutMs, chainId: rpc.chainId });
    return keys.map((key, i) => new RelayerChain(provider, rpc.chainId, key, i === 0));
  }

  /**
   * Calldata, or undefined for a signature the token cannot take. v 27/28 goes as v,r,s; a contract payer's other
   * bytes go through the bytes overload unchanged (Safe's v 0/1 and 31/32 mean something to it); an EOA's v 0/1 as 27/28.
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

  /** Simulates with the fees it is signed with (a contract may answer otherwise at gas price 0); SimulationError. */
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
      // The revert reason first: it names the token's refusal.
      const message = describe((error as { reason?: string })?.reason ?? error);
      if (/revert|execution reverted|FiatToken|ERC20|out of gas|gas required exceeds/i.test(message)) {
        throw new SimulationError(refusalOf(message), message);
      }
      throw error; // the RPC itself failed: not the authorization's fault
    }
  }

  async codeHash(address: string): Promise<string | null> {
    const code = await this.provider.getCode(formatAddress(address));
    return code === '0x' || code === '0x0' ? null : keccak256(code).toLowerCase();
  }

  usdcBalanceAt(tokenAddress: string, account: string, block: bigint): Promise<bigint> {
    return this.readAt(tokenAddress, 'balanceOf', [formatAddress(account)], block);
  }

  authorizationUsedAt(tokenAddress: string, payer: string, nonce: string, block: bigint): Promise<boolean> {
    return this.readAt(tokenAddress, 'authorizationState', [formatAddress(payer), nonce], block);
  }

  private async readAt<T>(tokenAddress: string, fn: string, args: unknown[], block: bigint): Promise<T> {
    const data = token.encodeFunctionData(fn, args);
    const result = await this.provider.call({ to: tokenAddress, data, blockTag: toQuantity(block) });
    return token.decodeFunctionResult(fn, result)[0] as T;
  }

  async balanceWei(): Promise<bigint> {
    return this.provider.getBalance(this.address);
  }

  async blockTimestampSec(block: bigint): Promise<bigint> {
    const found = await this.provider.getBlock(block);
    if (!found) throw new BlockNotFoundError(`block ${block} not found`);
    return BigInt(found.timestamp);
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

  /** Every receipt of one block by transaction hash (lowercase), in one `eth_getBlockReceipts`. */
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

  /** The successful transaction that used the authorization, found by its AuthorizationUsed log. */
  async authorizationUse(
    authorization: { tokenAddress: string; payer: string; nonce: string; to: string },
    lookbackBlocks: number,
  ): Promise<ExecutedTransfer | null> {
    const { tokenAddress, payer, nonce, to } = authorization;
    const head = await this.provider.getBlockNumber();
    const [log] = await this.provider.getLogs({
      address: tokenAddress,
      topics: [AUTHORIZATION_USED_TOPIC, addressToTopic(payer), nonce],
      fromBlock: Math.max(0, head - lookbackBlocks),
      toBlock: head,
    });
    const executed = log ? await this.executed(log.transactionHash.toLowerCase(), payer, to) : null;
    return executed?.reverted === false ? executed : null;
  }
}

/** The row columns naming the transaction that executed an authorization. */
export const settledBy = (executed: ExecutedTransfer) => ({
  settled_tx_hash: executed.txHash,
  block_number: executed.blockNumber,
  log_index: executed.logIndex,
});

/** A transaction's receipt read for the authorization: its payer → `to` Transfer log, reverted without one. */
export function executedIn(txHash: string, receipt: ReceiptFacts, payer: string, to: string) {
  const fromTopic = addressToTopic(payer);
  const toTopic = addressToTopic(to);
  const log = receipt.logs.find(
    (l) =>
      l.topics[0]?.toLowerCase() === TRANSFER_TOPIC &&
      l.topics[1]?.toLowerCase() === fromTopic &&
      l.topics[2]?.toLowerCase() === toTopic,
  );
  return {
    txHash: txHash.toLowerCase(),
    blockNumber: receipt.blockNumber,
    // The USDC Transfer log (payer → escrow) the authorization produced.
    logIndex: log?.index ?? -1,
    reverted: !receipt.succeeded || !log,
  };
}
