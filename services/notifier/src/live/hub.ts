import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Bus } from '@paygate/bus';
import { type EventEnvelope, SELLER_LIVE_EVENTS, validateEvent } from '@paygate/contracts';
import { addressBucket, clientAddress, errorBody, HttpError, HttpReason } from '@paygate/http';
import { Gauge, type Registry } from '@paygate/runtime';
import type { SellerAuth } from '@paygate/seller-auth';
import type { Logger } from '@paygate/telemetry';
import type { Kysely } from 'kysely';
import { LRUCache } from 'lru-cache';
import type { Subscription } from 'nats';
import { type RawData, type WebSocket, WebSocketServer } from 'ws';
import type { NotifierConfig } from '../config';
import type { NotifierDatabase } from '../db';
import { type CheckoutSessionSnapshot, findSession } from '../sessions/repository';
import {
  type Client,
  newClient,
  parseClientMessage,
  rejectUpgrade,
  send,
  sendError,
  sendSnapshot,
  withinRateLimit,
} from './client';
import { SESSION_ID_PATTERN, type SellerEventMessage } from './protocol';

export const WEBSOCKET_PATH = '/api/v1/ws';
/** Snapshots heard recently, kept because the core subscription can be ahead of the stored projection. */
const RECENT_SNAPSHOTS = 10_000;
/** What a client over its open-socket limit is told to wait (a socket of its own must close first). */
const TOO_MANY_SOCKETS_RETRY_SECONDS = 10;
/** A seller's socket asks the registry again this often whether its token still holds (expiry, sign-out, rotation). */
const SELLER_REVERIFY_MS = 60_000;
/** Tokens are short ASCII strings (sk_ keys, 12 h JWTs): a longer one is refused before any RPC. */
const TOKEN_MAX_LENGTH = 2048;
/** Close codes of the application range: the token was refused (sign in again), or could not be checked now. */
const CLOSE_UNAUTHORIZED = 4401;
const CLOSE_AUTH_UNAVAILABLE = 4503;

const decoder = new TextDecoder();

/** Each replica hears every session change on core NATS (not a shared durable): any serves any widget. */
export class LiveUpdates {
  private readonly wss: WebSocketServer;
  private readonly bySession = new Map<string, Set<Client>>();
  private readonly bySeller = new Map<string, Set<Client>>();
  private readonly subscriptions: Subscription[] = [];
  private readonly clients = new Set<Client>();
  /** Open sockets per client address (an IPv6 one by its /64: addressBucket) on this replica. */
  private readonly socketsByAddress = new Map<string, number>();
  private readonly recent = new LRUCache<string, CheckoutSessionSnapshot>({ max: RECENT_SNAPSHOTS });
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly connections: Gauge;

  constructor(
    private readonly deps: {
      db: Kysely<NotifierDatabase>;
      bus: Bus;
      logger: Logger;
      config: NotifierConfig;
      registry: Registry;
      auth: SellerAuth;
    },
  ) {
    this.wss = new WebSocketServer({ noServer: true, maxPayload: deps.config.wsMaxPayloadBytes });
    this.connections = new Gauge({
      name: 'notifier_websocket_connections',
      help: 'Open widget WebSocket connections on this replica',
      registers: [deps.registry],
    });
  }

  /** Starts hearing session changes; call before attach so no change falls between. */
  start(): void {
    const { bus } = this.deps;
    // `<ns>.checkout.*` covers every checkout.session_* subject; a core subscription sees JetStream publishes.
    this.hear(`${bus.subjectFor('checkout')}.*`, 'session', (envelope) => {
      if (envelope.type.startsWith('checkout.session_'))
        this.publish(envelope.data as CheckoutSessionSnapshot);
    });
    // A seller's own changes, from every producer: each names its seller, and only that seller's sockets hear it.
    for (const subject of SELLER_LIVE_EVENTS) {
      this.hear(bus.subjectFor(subject), 'seller', (envelope) => {
        const sellerId = (envelope.data as { sellerId?: unknown }).sellerId;
        if (typeof sellerId !== 'string') return; // e.g. a refund of money that paid no seller
        this.publishToSeller(sellerId, {
          type: 'seller_event',
          eventId: envelope.id,
          eventType: subject,
          occurredAt: envelope.occurredAt,
        });
      });
    }
    this.heartbeat = setInterval(() => this.sweep(), this.deps.config.wsHeartbeatIntervalMs);
    this.heartbeat.unref();
  }

  /** A core subscription handing each valid event to `heard`; an invalid one is logged and ignored. */
  private hear(subject: string, what: string, heard: (envelope: EventEnvelope) => void): void {
    const subscription = this.deps.bus.nc.subscribe(subject, {
      callback: (_error, message) => {
        try {
          heard(validateEvent(JSON.parse(decoder.decode(message.data))));
        } catch (error) {
          this.deps.logger.warn({ err: error, subject: message.subject }, `ignored an invalid ${what} event`);
        }
      },
    });
    this.subscriptions.push(subscription);
  }

  attach(server: Server): void {
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const path = new URL(req.url ?? '/', 'http://localhost').pathname;
      if (path !== WEBSOCKET_PATH) return rejectUpgrade(socket, 404, 'Not Found');
      if (this.clients.size >= this.deps.config.wsMaxSockets)
        return rejectUpgrade(socket, 503, 'Service Unavailable');
      const address = addressBucket(clientAddress(req, this.deps.config.trustedProxies));
      const limit = this.deps.config.wsMaxSocketsPerClient;
      if ((this.socketsByAddress.get(address) ?? 0) >= limit) {
        return rejectUpgrade(socket, 429, 'Too Many Requests', {
          retryAfterSeconds: TOO_MANY_SOCKETS_RETRY_SECONDS,
          body: errorBody(
            new HttpError(
              429,
              HttpReason.RateLimited,
              `at most ${limit} open WebSocket connections per client address; close one first`,
              { limit, retryAfterSeconds: TOO_MANY_SOCKETS_RETRY_SECONDS },
            ),
          ),
        });
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws, address));
    });
  }

  async stop(): Promise<void> {
    if (this.heartbeat) clearInterval(this.heartbeat);
    for (const subscription of this.subscriptions.splice(0)) subscription.unsubscribe();
    for (const client of this.clients) client.socket.terminate();
    this.clients.clear();
    this.socketsByAddress.clear();
    this.bySession.clear();
    this.bySeller.clear();
    this.recent.clear();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }

  get socketCount(): number {
    return this.clients.size;
  }

  /** Sends a snapshot to every socket of this replica subscribed to its session. */
  publish(snapshot: CheckoutSessionSnapshot): void {
    const known = this.recent.get(snapshot.sessionId);
    if (!known || Date.parse(known.updatedAt) <= Date.parse(snapshot.updatedAt))
      this.recent.set(snapshot.sessionId, snapshot);
    for (const client of this.bySession.get(snapshot.sessionId) ?? []) sendSnapshot(client, snapshot);
  }

  /** Tells every socket of this replica signed in as the seller that something of its account changed. */
  publishToSeller(sellerId: string, message: SellerEventMessage): void {
    for (const client of this.bySeller.get(sellerId) ?? []) send(client, message);
  }

  private accept(socket: WebSocket, address: string): void {
    const client = newClient(socket, address, Date.now());
    this.clients.add(client);
    this.socketsByAddress.set(address, (this.socketsByAddress.get(address) ?? 0) + 1);
    this.connections.set(this.clients.size);
    socket.on('pong', () => {
      client.alive = true;
    });
    socket.on('message', (data, isBinary) => void this.onMessage(client, data, isBinary));
    socket.on('close', () => this.drop(client));
    socket.on('error', () => this.drop(client));
  }

  private drop(client: Client): void {
    if (!this.clients.delete(client)) return;
    const open = (this.socketsByAddress.get(client.address) ?? 1) - 1;
    if (open > 0) this.socketsByAddress.set(client.address, open);
    else this.socketsByAddress.delete(client.address);
    for (const sessionId of client.sessions.keys()) this.unsubscribe(client, sessionId);
    if (client.seller) this.forgetSeller(client);
    this.connections.set(this.clients.size);
  }

  private async onMessage(client: Client, data: RawData, isBinary: boolean): Promise<void> {
    if (!withinRateLimit(client, Date.now())) return;
    const message = parseClientMessage(client, data, isBinary);
    if (!message) return;
    if (message.type === 'authenticate') return this.authenticate(client, message.token);
    if (message.type !== 'subscribe' && message.type !== 'unsubscribe')
      return sendError(client, 'unknown_type', 'type must be subscribe, unsubscribe or authenticate');
    const sessionId = message.sessionId;
    if (typeof sessionId !== 'string' || !SESSION_ID_PATTERN.test(sessionId))
      return sendError(client, 'invalid_session_id', 'sessionId must be 1-64 letters, digits, _ or -');
    if (message.type === 'unsubscribe') this.unsubscribe(client, sessionId);
    else await this.subscribe(client, sessionId);
  }

  /** Listens to the session (bounded per socket) and sends its current snapshot. */
  private async subscribe(client: Client, sessionId: string): Promise<void> {
    if (!client.sessions.has(sessionId)) {
      const max = this.deps.config.wsMaxSubscriptionsPerSocket;
      if (client.sessions.size >= max)
        return sendError(
          client,
          'too_many_subscriptions',
          `at most ${max} sessions per connection`,
          sessionId,
        );
      // Registered before the read, so a change during it is not missed (updatedAt drops the older one).
      client.sessions.set(sessionId, { updatedAtMs: -1, json: '' });
      client.idleSinceMs = null;
      join(this.bySession, sessionId, client);
    }
    send(client, { type: 'subscribed', sessionId });
    try {
      // The stored projection may lag the core subscription: a change heard but not yet stored still counts.
      const stored = await findSession(this.deps.db, sessionId);
      const heard = this.recent.get(sessionId);
      const current =
        stored && heard && Date.parse(heard.updatedAt) > Date.parse(stored.updatedAt)
          ? heard
          : (stored ?? heard);
      if (current) sendSnapshot(client, current);
    } catch (error) {
      this.deps.logger.warn({ err: error, sessionId }, 'could not read a session for a subscriber');
    }
  }

  /** The socket's sign-in with the dashboard's REST token; a refused token closes it. */
  private async authenticate(client: Client, token: unknown): Promise<void> {
    if (typeof token !== 'string' || token.length === 0 || token.length > TOKEN_MAX_LENGTH)
      return sendError(client, 'invalid_token', 'token must be the dashboard session token or an sk_ key');
    const identity = await this.deps.auth.resolve(token).catch((error) => this.refuse(client, error));
    if (!identity) return;
    const { sellerId } = identity;
    if (client.seller && client.seller.sellerId !== sellerId) this.forgetSeller(client);
    client.seller = { sellerId, token, verifiedAtMs: Date.now(), verifying: false };
    client.idleSinceMs = null;
    join(this.bySeller, sellerId, client);
    send(client, { type: 'authenticated', sellerId });
  }

  /** A token the registry refused (or could not check): said on the socket, which is then closed. */
  private refuse(client: Client, error: unknown): void {
    const unavailable = (error as { status?: number }).status === 503;
    if (unavailable) {
      sendError(client, 'auth_unavailable', 'cannot verify the token right now; connect again shortly');
      client.socket.close(CLOSE_AUTH_UNAVAILABLE, 'auth unavailable');
    } else {
      sendError(
        client,
        'unauthorized',
        'the token is not valid (unknown, rotated or expired): sign in again',
      );
      client.socket.close(CLOSE_UNAUTHORIZED, 'unauthorized');
    }
  }

  private forgetSeller(client: Client): void {
    const sellerId = client.seller?.sellerId;
    if (!sellerId) return;
    leave(this.bySeller, sellerId, client);
    client.seller = undefined;
  }

  /** A seller socket's token is asked about again now and then: an expired or signed-out one ends the socket. */
  private reverify(client: Client, now: number): void {
    const seller = client.seller;
    if (!seller || seller.verifying || now - seller.verifiedAtMs < SELLER_REVERIFY_MS) return;
    seller.verifying = true;
    this.deps.auth.resolve(seller.token).then(
      (identity) => {
        seller.verifying = false;
        seller.verifiedAtMs = Date.now();
        if (identity.sellerId !== seller.sellerId) this.refuse(client, new Error('seller changed'));
      },
      (error) => {
        seller.verifying = false;
        // A registry that cannot answer leaves the socket open: the token was valid and is asked again later.
        if ((error as { status?: number }).status !== 503) this.refuse(client, error);
      },
    );
  }

  private unsubscribe(client: Client, sessionId: string): void {
    client.sessions.delete(sessionId);
    if (client.sessions.size === 0 && !client.seller && client.idleSinceMs === null)
      client.idleSinceMs = Date.now();
    leave(this.bySession, sessionId, client);
  }

  /** Heartbeat: terminates sockets that did not answer the last ping, and closes long-idle ones. */
  private sweep(): void {
    const now = Date.now();
    for (const client of this.clients) {
      if (!client.alive) {
        client.socket.terminate();
        this.drop(client);
        continue;
      }
      this.reverify(client, now);
      if (client.idleSinceMs !== null && now - client.idleSinceMs > this.deps.config.wsIdleTimeoutMs) {
        client.socket.close(1000, 'idle');
        continue;
      }
      client.alive = false;
      client.socket.ping();
    }
  }
}

function join(sockets: Map<string, Set<Client>>, key: string, client: Client): void {
  const set = sockets.get(key) ?? new Set<Client>();
  sockets.set(key, set.add(client));
}

/** Removes the client; a key no socket listens to any more is forgotten. */
function leave(sockets: Map<string, Set<Client>>, key: string, client: Client): void {
  const set = sockets.get(key);
  set?.delete(client);
  if (set?.size === 0) sockets.delete(key);
}
