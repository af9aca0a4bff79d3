import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

interface RpcCall {
  jsonrpc: string;
  id: unknown;
  method: string;
  params?: unknown[];
}

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
  const answer = async (call: RpcCall) => {
    if (refuses(call)) {
      refusals++;
      return {
        jsonrpc: '2.0',
        id: call.id,
        error: { code: -32005, message: 'query returned more than 10000 results' },
      };
    }
    const upstream = await fetch(upstreamUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(call),
      signal: AbortSignal.timeout(10_000),
    });
    return upstream.json();
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as RpcCall | RpcCall[];
        const replies = await Promise.all([body].flat().map(answer));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(Array.isArray(body) ? replies : replies[0]));
      } catch (error) {
        res.writeHead(502).end(String(error));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    refuseBlock: (block: number) => {
      refusedBlocks.add(block);
    },
    /** How many eth_getLogs calls were refused. */
    refusals: () => refusals,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
