import { type RpcCall, rpcError, startRpcProxy } from '@paygate/testing';

interface LogFilter {
  fromBlock?: string;
  toBlock?: string;
  topics?: unknown[];
}

/**
 * A JSON-RPC endpoint in front of a node with a result limit: an eth_getLogs whose range holds a refused block (one
 * with more USDC transfers than a node returns at once) and that names no recipient (`to` topic), or more than
 * `recipientsAtOnce`, is answered the error a node gives past its limit; everything else is forwarded.
 */
export async function startLogLimitProxy(upstreamUrl: string, recipientsAtOnce: number) {
  const refusedBlocks = new Set<number>();
  let refusals = 0;
  const refuses = (call: RpcCall) => {
    if (call.method !== 'eth_getLogs') return false;
    const filter = call.params?.[0] as LogFilter | undefined;
    if (!filter) return false;
    const recipients = [filter.topics?.[2] ?? []].flat().length;
    if (recipients > 0 && recipients <= recipientsAtOnce) return false;
    const from = Number(filter.fromBlock);
    const to = Number(filter.toBlock);
    return [...refusedBlocks].some((block) => from <= block && block <= to);
  };
  const proxy = await startRpcProxy({
    upstream: upstreamUrl,
    answer: (call) => {
      if (!refuses(call)) return undefined;
      refusals++;
      return rpcError(call, -32005, 'query returned more than 10000 results');
    },
  });
  return {
    url: proxy.url,
    refuseBlock: (block: number) => {
      refusedBlocks.add(block);
    },
    /** How many eth_getLogs calls were refused. */
    refusals: () => refusals,
    close: proxy.close,
  };
}
