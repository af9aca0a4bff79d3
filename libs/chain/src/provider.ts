import {
  FetchRequest,
  type FetchResponse,
  type JsonRpcError,
  type JsonRpcPayload,
  JsonRpcProvider,
  type JsonRpcResult,
  makeError,
  Network,
} from 'ethers';
import { ChainMismatchError, RpcResultError } from './errors';

/** Sends each call at once: ethers queues every call behind a drain timer of at least 1 ms, batch or not. */
class PromptJsonRpcProvider extends JsonRpcProvider {
  #nextId = 1;

  /** Errors without the RPC URL's secret parts (ethers puts the URL into a failed call's error). */
  override async _send(payload: JsonRpcPayload | Array<JsonRpcPayload>): Promise<Array<JsonRpcResult>> {
    try {
      return await super._send(payload);
    } catch (error) {
      throw withoutRpcUrl(error, this._getConnection().url);
    }
  }

  override async send(method: string, params: Array<any> | Record<string, any>): Promise<any> {
    if (this.destroyed) return super.send(method, params);
    this._start();
    const payload: JsonRpcPayload = { method, params, id: this.#nextId++, jsonrpc: '2.0' };
    const replies = (await this._send(payload)) as Array<JsonRpcResult | JsonRpcError>;
    const response = replies.find((reply) => reply.id === payload.id);
    if (!response)
      throw makeError('missing response for request', 'BAD_DATA', { value: replies, info: { payload } });
    if ('error' in response) throw this.getRpcError(payload, response);
    return response.result;
  }
}

/** An RPC URL as a log may show it: scheme, host and port; path, query and credentials (API keys) are redacted. */
export function rpcUrlForLogs(rpcUrl: string): string {
  let url: URL;
  try {
    url = new URL(rpcUrl);
  } catch {
    return '[an RPC URL that does not parse]';
  }
  const secretParts = url.username || url.password || url.search || url.hash || url.pathname.length > 1;
  return secretParts ? `${url.protocol}//${url.host}/[redacted]` : `${url.protocol}//${url.host}`;
}

function withoutRpcUrl(error: unknown, rpcUrl: string): unknown {
  if (typeof error !== 'object' || error === null) return error;
  const shown = rpcUrlForLogs(rpcUrl);
  const scrub = (text: string) => text.split(rpcUrl).join(shown);
  const failed = error as { message?: unknown; info?: { requestUrl?: unknown } };
  if (typeof failed.message === 'string') failed.message = scrub(failed.message);
  if (failed.info && typeof failed.info.requestUrl === 'string') failed.info.requestUrl = shown;
  return error;
}

interface MakeProviderOptions {
  /** Per-request timeout of every JSON-RPC call. */
  timeoutMs: number;
  /** When given, the provider never probes the network; else ethers asks eth_chainId once and caches it. */
  chainId?: number;
  pollingIntervalMs?: number;
  /** How long ethers shares an identical read's answer; off (-1) by default: a stale nonce after a send is a bug. */
  cacheTimeoutMs?: number;
}

/** An ethers JsonRpcProvider with a request timeout and a static network. */
export function makeProvider(rpcUrl: string, options: MakeProviderOptions): JsonRpcProvider {
  if (!(options.timeoutMs > 0)) throw new RangeError(`timeoutMs must be positive, got ${options.timeoutMs}`);
  const request = new FetchRequest(rpcUrl);
  request.timeout = options.timeoutMs;
  const network = options.chainId === undefined ? undefined : Network.from(options.chainId);
  return new PromptJsonRpcProvider(request, network, {
    staticNetwork: network ?? true,
    batchMaxCount: 1,
    pollingInterval: options.pollingIntervalMs ?? 1000,
    cacheTimeout: options.cacheTimeoutMs ?? -1,
  });
}

/** Readiness: the RPC answers and serves CHAIN_NETWORK's chain (another chain's RPC answers reads too). */
export async function checkChainRpc(provider: JsonRpcProvider, chainId: number): Promise<void> {
  if (servedChainIds.get(provider) === chainId) {
    await provider.getBlockNumber();
    return;
  }
  const [served] = await Promise.all([provider.send('eth_chainId', []), provider.getBlockNumber()]);
  const servedChainId = Number(BigInt(served));
  if (servedChainId !== chainId) {
    throw new ChainMismatchError(servedChainId, chainId);
  }
  servedChainIds.set(provider, servedChainId);
}

/** A URL's chain does not change under a running service. */
const servedChainIds = new WeakMap<JsonRpcProvider, number>();

/** Asks an RPC for its chain id with a bounded timeout (no ethers provider, no retries). */
export async function fetchChainId(rpcUrl: string, options: { timeoutMs: number }): Promise<number> {
  const request = new FetchRequest(rpcUrl);
  request.timeout = options.timeoutMs;
  request.setHeader('content-type', 'application/json');
  request.body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });
  let response: FetchResponse;
  try {
    response = await request.send();
    response.assertOk();
  } catch (error) {
    throw withoutRpcUrl(error, rpcUrl);
  }
  const body = response.bodyJson as { result?: string; error?: { message?: string } };
  if (typeof body.result !== 'string') {
    throw new RpcResultError(
      `eth_chainId failed at ${rpcUrlForLogs(rpcUrl)}: ${body.error?.message ?? 'no result'}`,
    );
  }
  return Number(BigInt(body.result));
}

/** Sends exact signed bytes; a refusal of a transaction the node already knows (a rebroadcast) resolves. */
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
