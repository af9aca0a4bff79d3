/**
 * The run's load balancer and edge in one: routes each path to the service that owns it (deploy/routes.json, as
 * the k8s Ingress does) and spreads requests over that service's replicas, round robin. A replica that refuses
 * the connection (killed) or does not answer within `tryTimeoutMs` (frozen) is skipped and the request goes to
 * the next one, as a Kubernetes Service behind a readiness probe would; the request body is kept to resend it.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { routeFor } from '../dev/edge';
import type { Replica } from './replicas';

export class Balancer {
  private next = new Map<string, number>();
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(replicas: Replica[], tryTimeoutMs = 8000): Promise<Balancer> {
    let balancer: Balancer | undefined;
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk) => chunks.push(chunk));
      req.on('end', () => void balancer!.forward(req, Buffer.concat(chunks), res, replicas, tryTimeoutMs));
    });
    server.on('connection', (socket) => {
      balancer!.sockets.add(socket);
      socket.once('close', () => balancer!.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    balancer = new Balancer(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return balancer;
  }

  private async forward(
    req: http.IncomingMessage,
    body: Buffer,
    res: http.ServerResponse,
    replicas: Replica[],
    tryTimeoutMs: number,
  ): Promise<void> {
    const service = routeFor(new URL(req.url ?? '/', 'http://x').pathname);
    const candidates = replicas.filter((r) => r.service === service);
    if (!service || candidates.length === 0) {
      res.writeHead(404).end();
      return;
    }
    const start = this.next.get(service) ?? 0;
    this.next.set(service, start + 1);
    for (let i = 0; i < candidates.length; i++) {
      const replica = candidates[(start + i) % candidates.length]!;
      if (!replica.isRunning() || replica.frozen) continue;
      const answered = await this.tryReplica(replica, req, body, res, tryTimeoutMs);
      if (answered) return;
    }
    if (!res.headersSent) {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'no_replica', message: `no ${service} replica answered` } }));
    }
  }

  /** True when the replica answered (the answer is relayed); false when it never got the request or hung. */
  private tryReplica(
    replica: Replica,
    req: http.IncomingMessage,
    body: Buffer,
    res: http.ServerResponse,
    timeoutMs: number,
  ): Promise<boolean> {
    return new Promise((resolve) => {
      const headers = { ...req.headers, 'x-forwarded-for': '127.0.0.1' };
      const upstream = http.request(
        {
          host: '127.0.0.1',
          port: replica.port,
          method: req.method,
          path: req.url,
          headers,
          timeout: timeoutMs,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          answer.on('end', () => resolve(true));
          answer.on('error', () => {
            res.destroy();
            resolve(true);
          });
        },
      );
      // Refused, reset or timed out before an answer: the next replica gets the request. (A request that reached a
      // replica which then died may run twice: the services must be idempotent there, which the run checks.)
      upstream.on('error', () => resolve(false));
      upstream.on('timeout', () => upstream.destroy(new Error('timeout')));
      upstream.end(body);
    });
  }

  async stop(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }
}
