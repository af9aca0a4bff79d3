import { FetchRequest, JsonRpcProvider, Network } from 'ethers';

export interface MakeProviderOptions {
  /** Per-request timeout of every JSON-RPC call. */
  timeoutMs: number;
  /**
   * The chain the RPC serves. When given, the provider never probes the network (no eth_chainId at start).
   * When omitted, ethers asks eth_chainId once and then caches it (retrying every second while the RPC is down).
   */
  chainId?: number;
  /** How often block/event subscriptions poll. */
  pollingIntervalMs?: number;
  /** JSON-RPC batch size; 1 (no batching) keeps per-call errors and timeouts independent. */
  batchMaxCount?: number;
  /**
   * How long ethers shares the answer of an identical read (eth_getTransactionCount, eth_blockNumber, eth_call…).
   * Off (-1) by default: a stale nonce or block number right after a send is a bug source, not an optimisation.
   */
  cacheTimeoutMs?: number;
}

/** An ethers JsonRpcProvider with a request timeout and a static network. */
export function makeProvider(rpcUrl: string, options: MakeProviderOptions): JsonRpcProvider {
  if (!(options.timeoutMs > 0)) throw new Error(`timeoutMs must be positive, got ${options.timeoutMs}`);
  const request = new FetchRequest(rpcUrl);
  request.timeout = options.timeoutMs;
  const network = options.chainId === undefined ? undefined : Network.from(options.chainId);
  const provider = new JsonRpcProvider(request, network, {
    staticNetwork: network ?? true,
    batchMaxCount: options.batchMaxCount ?? 1,
    pollingInterval: options.pollingIntervalMs ?? 1000,
    cacheTimeout: options.cacheTimeoutMs ?? -1,
  });
  return provider;
}

/** Asks an RPC for its chain id with a bounded timeout (no ethers provider, no retries). */
export async function fetchChainId(rpcUrl: string, options: { timeoutMs: number }): Promise<number> {
  const request = new FetchRequest(rpcUrl);
  request.timeout = options.timeoutMs;
  request.setHeader('content-type', 'application/json');
  request.body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });
  const response = await request.send();
  response.assertOk();
  const body = response.bodyJson as { result?: string; error?: { message?: string } };
  if (typeof body.result !== 'string') {
    throw new Error(`eth_chainId failed at ${rpcUrl}: ${body.error?.message ?? 'no result'}`);
  }
  return Number(BigInt(body.result));
}

let nextRequestId = 1;

/**
 * One JSON-RPC call sent at once, with the provider's timeout. `provider.send` queues each call behind a drain
 * timer (a `setTimeout` of at least 1 ms even with batchMaxCount 1), a tenth of the relayer's work between a new
 * head and its answer. Throws the node's error with its message.
 */
export async function sendNow<T>(provider: JsonRpcProvider, method: string, params: unknown[]): Promise<T> {
  const [reply] = (await provider._send({ jsonrpc: '2.0', id: nextRequestId++, method, params })) as Array<
    { result?: unknown; error?: { code?: number; message?: string } } | undefined
  >;
  if (!reply) throw new Error(`${method}: the node sent no answer`);
  if (reply.error) throw new Error(`${method}: ${reply.error.message ?? 'error'} (code ${reply.error.code})`);
  return reply.result as T;
}

/**
 * Sends exact signed bytes. Resolves when the node accepted them or already knows the transaction (a
 * rebroadcast after a crash, "already known", "nonce too low" once our own transaction was mined): the node's
 * view of the hash decides. Throws when the node refused them and does not know the transaction.
 */
export async function broadcastSignedTransaction(
  provider: JsonRpcProvider,
  rawTx: string,
  txHash: string,
): Promise<void> {
  try {
    await provider.send('eth_sendRawTransaction', [rawTx]);
  } catch (error) {
    const known = await provider.getTransaction(txHash).catch(() => null);
    if (known) return;
    throw error;
  }
}
