import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buffer } from 'node:stream/consumers';

/** One JSON-RPC call, as a client sent it (alone or in a batch). */
export interface RpcCall {
  jsonrpc?: string;
  id?: unknown;
  method: string;
  params?: unknown[];
}

interface RpcReply {
  jsonrpc: string;
  id: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

type RpcForward = (call: RpcCall) => Promise<RpcReply>;

interface RpcProxyOptions {
  /** The node calls are forwarded to; a function is asked again for every forward (a switching load balancer). */
  upstream: string | (() => string);
  /** The test's rule per call: a reply answers it (`forward` asks the node), undefined forwards it. */
  answer?: (call: RpcCall, forward: RpcForward) => RpcReply | undefined | Promise<RpcReply | undefined>;
  /** Every request waits this long (after it is counted) before it is answered: a real network's latency. */
  delayMs?: number;
  /** Per forward to the node; 10 s unless told. */
  timeoutMs?: number;
}

interface RpcProxy {
  /** `http://127.0.0.1:<port>`, the endpoint to give the service under test. */
  url: string;
  /** JSON-RPC calls received by method (batches counted call by call), since the proxy started. */
  calls: Map<string, number>;
  /** Stops listening and drops every open connection. */
  close(): Promise<void>;
}

export function rpcError(call: RpcCall, code: number, message: string): RpcReply {
  return { jsonrpc: '2.0', id: call.id, error: { code, message } };
}

/** The calls of a request body (one, or a batch), or undefined for a body that is not JSON-RPC (forwarded as is). */
function parseCalls(body: Buffer): RpcCall | RpcCall[] | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  const isCall = (value: unknown) =>
    typeof value === 'object' && value !== null && typeof (value as RpcCall).method === 'string';
  if (Array.isArray(parsed)) return parsed.every(isCall) ? (parsed as RpcCall[]) : undefined;
  return isCall(parsed) ? (parsed as RpcCall) : undefined;
}

/** A JSON-RPC endpoint in front of a node: forwards each call `answer` does not reply to (502 on failure). */
export async function startRpcProxy(options: RpcProxyOptions): Promise<RpcProxy> {
  const calls = new Map<string, number>();
  const timeoutMs = options.timeoutMs ?? 10_000;
  const post = (body: string | Buffer<ArrayBuffer>) =>
    fetch(typeof options.upstream === 'string' ? options.upstream : options.upstream(), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(timeoutMs),
    });
  const forward: RpcForward = async (call) => (await (await post(JSON.stringify(call))).json()) as RpcReply;

  async function handle(body: Buffer<ArrayBuffer>): Promise<{ status: number; body: string | Buffer }> {
    const parsed = parseCalls(body);
    const list = parsed === undefined ? [] : [parsed].flat();
    for (const call of list) calls.set(call.method, (calls.get(call.method) ?? 0) + 1);
    if (options.delayMs) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
    const answer = options.answer;
    const answered = answer ? await Promise.all(list.map((call) => answer(call, forward))) : [];
    if (answered.every((reply) => reply === undefined)) {
      const upstream = await post(body);
      return { status: upstream.status, body: Buffer.from(await upstream.arrayBuffer()) };
    }
    const replies = await Promise.all(list.map((call, i) => answered[i] ?? forward(call)));
    return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? replies : replies[0]) };
  }

  const server = createServer((req, res) => {
    buffer(req)
      .then((body) => handle(body as Buffer<ArrayBuffer>))
      .then(
        (reply) => {
          res.writeHead(reply.status, { 'content-type': 'application/json' });
          res.end(reply.body);
        },
        (error) => res.writeHead(502).end(String(error)),
      );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
