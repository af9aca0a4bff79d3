import { createServer, type IncomingMessage, type Server } from 'node:http';
import {
  type AddressInfo,
  createServer as createNetServer,
  type Server as NetServer,
  type Socket,
} from 'node:net';
import { type Bus, encodeEnvelope, type RpcServer, serveRpc } from '@paygate/bus';
import type { EventData, ServiceName, Subject } from '@paygate/contracts';
import { eventDataOf, eventOf } from '@paygate/testing/events';
import WebSocket from 'ws';

/** Publishes an event the way a producer's outbox relay would (JetStream, Nats-Msg-Id = event id). */
export async function publish<S extends Subject>(
  bus: Bus,
  type: S,
  producer: ServiceName,
  data: EventData<S>,
): Promise<string> {
  const envelope = eventOf(type, data, { producer });
  await bus.js.publish(bus.subjectFor(type), encodeEnvelope(envelope), { msgID: envelope.id });
  return envelope.id;
}

/** Answers the registry's webhook-secret RPC from a table, standing in for the registry in these tests. */
export function serveWebhookSecrets(
  bus: Bus,
  secrets: Record<string, { secret: string; version: number }>,
): Promise<RpcServer> {
  return serveRpc(
    bus,
    'registry.webhook_secret',
    async ({ sellerId }) => {
      const entry = secrets[sellerId];
      return entry ? { ok: true, ...entry } : { ok: false };
    },
    { warn: () => undefined, error: () => undefined },
  );
}

export interface ReceivedWebhook {
  headers: IncomingMessage['headers'];
  body: string;
  receivedAt: number;
}

/** A seller's webhook endpoint: records every request and answers with whatever `respond` says. */
export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  respond: (request: ReceivedWebhook) => number | 'hang' = () => 200;
  private server: Server | undefined;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const request = {
          headers: req.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          receivedAt: Date.now(),
        };
        this.received.push(request);
        const answer = this.respond(request);
        if (answer === 'hang') return;
        res.writeHead(answer, { 'content-type': 'text/plain' });
        res.end(answer >= 200 && answer < 300 ? 'ok' : `status ${answer}`);
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}

/** A widget's socket: collects every server message. */
export class WidgetSocket {
  readonly messages: any[] = [];
  closed: { code: number; reason: string } | undefined;
  private constructor(readonly socket: WebSocket) {
    socket.on('message', (data) => this.messages.push(JSON.parse(data.toString())));
    socket.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
    });
  }

  static async open(baseUrl: string): Promise<WidgetSocket> {
    const socket = new WebSocket(`${baseUrl.replace(/^http/, 'ws')}/api/v1/ws`);
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    return new WidgetSocket(socket);
  }

  send(message: unknown): void {
    this.socket.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  sessionMessages(sessionId: string): any[] {
    return this.messages.filter((m) => m.type === 'session' && m.session.sessionId === sessionId);
  }

  close(): void {
    this.socket.terminate();
  }
}

export const SELLER_ID = 'seller_01';
export const OTHER_SELLER_ID = 'seller_02';

/** A session snapshot: the schema's sample (libs/testing eventDataOf) with an open session of SELLER_ID. */
export function sessionSnapshot(
  overrides: Partial<EventData<'checkout.session_created'>> = {},
): EventData<'checkout.session_created'> {
  return eventDataOf('checkout.session_created', {
    sessionId: 'cs_01',
    sellerId: SELLER_ID,
    skillId: null,
    description: 'Test order',
    status: 'open',
    exactAmount: '5.004217',
    paidAmount: null,
    network: 'local',
    chainId: 31337,
    expiresAt: new Date(Date.now() + 15 * 60_000).toISOString(),
    lateUntil: new Date(Date.now() + 75 * 60_000).toISOString(),
    txHash: null,
    payer: null,
    createdAt: new Date().toISOString(),
    updatedAt: new Date().toISOString(),
    ...overrides,
  });
}

/** A seller.updated of SELLER_ID at revision 1, with the identity sellerIdentity answers and no webhook URL. */
export function sellerUpdated(
  overrides: Partial<EventData<'seller.updated'>> = {},
): EventData<'seller.updated'> {
  return eventDataOf('seller.updated', {
    ...sellerIdentity(SELLER_ID),
    revision: 1,
    webhookUrl: null,
    webhookSecretVersion: 1,
    updatedAt: new Date().toISOString(),
    ...overrides,
  });
}

/** What the registry's key resolution answers for a seller (the wallet and payout address are placeholders). */
export function sellerIdentity(sellerId: string) {
  return {
    sellerId,
    walletAddress: `0x${'b'.repeat(40)}`,
    payoutAddress: `0x${'b'.repeat(40)}`,
    publishableKey: 'pk_test_0123456789abcdef',
    apiKeyVersion: 1,
  };
}

let paymentCounter = 0;
/** A payment.confirmed payload for the seller: each call a new payment (its own id and tx hash). */
export function paymentConfirmed(
  sellerId: string,
  overrides: Partial<EventData<'payment.confirmed'>> = {},
): EventData<'payment.confirmed'> {
  paymentCounter += 1;
  return eventDataOf('payment.confirmed', {
    paymentId: `pay_${sellerId}_${paymentCounter}`,
    source: 'x402',
    sellerId,
    skillId: null,
    skillName: null,
    endpointId: null,
    sessionId: null,
    payer: `0x${'4'.repeat(40)}`,
    amount: '0.25',
    network: 'local',
    chainId: 31337,
    txHash: `0x${paymentCounter.toString(16).padStart(64, '0')}`,
    holdPeriodHours: 0,
    confirmedAt: new Date().toISOString(),
    ...overrides,
  });
}

/**
 * A webhook server that accepts TCP connections and never answers (not even the HTTP status line): every request
 * sent to it costs the sender its whole timeout. Records when each connection opened.
 */
export class SilentServer {
  readonly connectedAt: number[] = [];
  private readonly sockets = new Set<Socket>();
  private server: NetServer | undefined;
  url = '';

  async start(): Promise<this> {
    this.server = createNetServer((socket) => {
      this.connectedAt.push(Date.now());
      this.sockets.add(socket);
      socket.on('data', () => undefined);
      socket.on('error', () => undefined);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}
