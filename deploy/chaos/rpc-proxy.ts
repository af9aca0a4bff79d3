/**
 * A JSON-RPC proxy in front of anvil that the services use as their chain node, and that misbehaves on demand
 * the way hosted RPC providers do: slow answers, 429 and 502, a stale head (a lagging node), null receipts for
 * mined transactions, and a send that reaches the chain but whose answer never comes back (the client times out
 * although the transaction was mined). Faults are switched on for a window; within it, each request is hit with
 * probability `rate`, drawn from the run's seeded PRNG.
 */
import http from 'node:http';
import type { Prng } from './prng';

export const RPC_FAULTS = ['delay', 'http429', 'http502', 'staleHead', 'nullReceipt', 'sendTimeout'] as const;
export type RpcFault = (typeof RPC_FAULTS)[number];

interface JsonRpcRequest {
  id: unknown;
  method: string;
}

export class RpcFaultProxy {
  private fault: { kind: RpcFault; until: number; rate: number } | undefined;
  readonly hits: Record<RpcFault, number> = Object.fromEntries(RPC_FAULTS.map((f) => [f, 0])) as Record<
    RpcFault,
    number
  >;
  private readonly sockets = new Set<import('node:net').Socket>();

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(upstream: string, prng: Prng): Promise<RpcFaultProxy> {
    let proxy: RpcFaultProxy | undefined;
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk) => chunks.push(chunk));
      req.on('end', () => void proxy!.handle(Buffer.concat(chunks), res, upstream, prng));
    });
    server.keepAliveTimeout = 1000;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as import('node:net').AddressInfo;
    proxy = new RpcFaultProxy(server, `http://127.0.0.1:${port}`);
    server.on('connection', (socket) => {
      proxy!.sockets.add(socket);
      socket.once('close', () => proxy!.sockets.delete(socket));
    });
    return proxy;
  }

  /** Turns a fault on for `durationMs`; each request meanwhile is hit with probability `rate`. */
  inject(kind: RpcFault, durationMs: number, rate = 0.4): void {
    this.fault = { kind, until: Date.now() + durationMs, rate };
  }

  clear(): void {
    this.fault = undefined;
  }

  private active(prng: Prng): RpcFault | undefined {
    if (!this.fault || Date.now() > this.fault.until) return undefined;
    return prng.chance(this.fault.rate) ? this.fault.kind : undefined;
  }

  private async handle(body: Buffer, res: http.ServerResponse, upstream: string, prng: Prng): Promise<void> {
    let parsed: JsonRpcRequest | JsonRpcRequest[];
    try {
      parsed = JSON.parse(body.toString());
    } catch {
      res.writeHead(400).end();
      return;
    }
    const requests = Array.isArray(parsed) ? parsed : [parsed];
    const methods = new Set(requests.map((r) => r.method));
    const fault = this.active(prng);
    if (fault === 'delay') {
      this.hits.delay++;
      await new Promise((r) => setTimeout(r, 500 + prng.int(0, 2500)));
    } else if (fault === 'http429' || fault === 'http502') {
      this.hits[fault]++;
      res.writeHead(fault === 'http429' ? 429 : 502, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          jsonrpc: '2.0',
          id: requests[0]?.id ?? null,
          error: { code: -32005, message: fault },
        }),
      );
      return;
    }
    let answer: Response;
    try {
      answer = await fetch(upstream, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: new Uint8Array(body),
        signal: AbortSignal.timeout(20_000),
      });
    } catch {
      res.writeHead(502).end();
      return;
    }
    const text = await answer.text();
    if (fault === 'sendTimeout' && methods.has('eth_sendRawTransaction')) {
      // The transaction is on its way to the chain; the client never hears so, and gives up on its own timeout.
      this.hits.sendTimeout++;
      setTimeout(() => res.destroy(), 15_000);
      return;
    }
    let out = text;
    if (fault === 'staleHead' && methods.has('eth_blockNumber')) {
      this.hits.staleHead++;
      out = rewrite(
        text,
        (r, request) =>
          request?.method === 'eth_blockNumber' && typeof r.result === 'string'
            ? {
                ...r,
                result: `0x${Math.max(0, Number.parseInt(r.result, 16) - prng.int(1, 3)).toString(16)}`,
              }
            : r,
        requests,
      );
    } else if (fault === 'nullReceipt' && methods.has('eth_getTransactionReceipt')) {
      this.hits.nullReceipt++;
      out = rewrite(
        text,
        (r, request) => (request?.method === 'eth_getTransactionReceipt' ? { ...r, result: null } : r),
        requests,
      );
    }
    res.writeHead(answer.status, { 'content-type': 'application/json' });
    res.end(out);
  }

  async stop(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }
}

type JsonRpcAnswer = { id?: unknown; result?: unknown };

function rewrite(
  text: string,
  change: (answer: JsonRpcAnswer, request: JsonRpcRequest | undefined) => JsonRpcAnswer,
  requests: JsonRpcRequest[],
): string {
  try {
    const parsed = JSON.parse(text) as JsonRpcAnswer | JsonRpcAnswer[];
    const byId = (answer: JsonRpcAnswer) => requests.find((r) => r.id === answer.id);
    return JSON.stringify(
      Array.isArray(parsed) ? parsed.map((a) => change(a, byId(a))) : change(parsed, byId(parsed)),
    );
  } catch {
    return text;
  }
}
