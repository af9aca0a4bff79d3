/**
 * The sellers' webhook endpoint: fails about half of its deliveries (a 500, a timeout, a body sent slowly)
 * and records every event id it accepted, so the run can check each webhook event arrived at least once.
 */
import http from 'node:http';
import type { Prng } from './prng';

export class WebhookReceiver {
  readonly accepted = new Map<string, number>();
  readonly failures = { http500: 0, timeout: 0, slowBody: 0 };
  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(prng: Prng, failRate = 0.5): Promise<WebhookReceiver> {
    let receiver: WebhookReceiver | undefined;
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk) => chunks.push(chunk));
      req.on('end', () => {
        if (prng.chance(failRate)) {
          const kind = prng.pick(['http500', 'timeout', 'slowBody'] as const);
          receiver!.failures[kind]++;
          if (kind === 'http500') res.writeHead(500).end('chaos');
          else if (kind === 'timeout') setTimeout(() => res.destroy(), 15_000);
          else {
            // Headers late, then a body that never ends: the sender must give up on its own timeout.
            setTimeout(() => {
              res.writeHead(500, { 'content-type': 'text/plain' });
              res.write('o');
            }, 1000);
            setTimeout(() => res.destroy(), 15_000);
          }
          return;
        }
        try {
          const event = JSON.parse(Buffer.concat(chunks).toString()) as { id?: string };
          if (event.id) receiver!.accepted.set(event.id, (receiver!.accepted.get(event.id) ?? 0) + 1);
        } catch {
          // not an event: still answered
        }
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as import('node:net').AddressInfo;
    receiver = new WebhookReceiver(server, `http://127.0.0.1:${port}/webhooks`);
    return receiver;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
