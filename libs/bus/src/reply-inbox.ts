import { createInbox, type Msg, type MsgHdrs, type NatsConnection, nuid, type Subscription } from 'nats';
import type { Bus } from './connection';

const NO_REPLY_MESSAGES = {
  TIMEOUT: (subject: string) => `no reply on ${subject} in time`,
  '503': (subject: string) => `no responders on ${subject}`,
  PERMISSIONS_VIOLATION: (subject: string) => `Permissions Violation for Publish to ${subject}`,
  CONNECTION_CLOSED: (subject: string) => `connection closed before ${subject} was answered`,
};

/** Why a request got no reply, in nats.js's codes: RpcUnavailableError reads `code` (TIMEOUT: a busy responder). */
export class NoReplyError extends Error {
  override name = 'NoReplyError';
  constructor(
    readonly code: keyof typeof NO_REPLY_MESSAGES,
    subject: string,
  ) {
    super(NO_REPLY_MESSAGES[code](subject));
  }
}

interface Waiting {
  resolve(message: Msg): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
  subject: string;
}

/** One reply subscription per connection, as nats.js's mux, without the Error it builds per request. */
class ReplyInbox {
  private readonly base: string;
  private readonly subscription: Subscription;
  private readonly waiting = new Map<string, Waiting>();

  constructor(
    private readonly nc: NatsConnection,
    inboxPrefix: string,
  ) {
    this.base = createInbox(inboxPrefix);
    this.subscription = nc.subscribe(`${this.base}.*`, { callback: (_, message) => this.answered(message) });
    void nc.closed().then(() => this.refuseWaiting('CONNECTION_CLOSED', () => true));
    void this.watchRefusedPublishes();
  }

  get closed(): boolean {
    return this.subscription.isClosed();
  }

  request(
    subject: string,
    data: Uint8Array,
    options: { timeoutMs: number; headers?: MsgHdrs },
  ): Promise<Msg> {
    // Random, as nats.js's: a responder that learnt one reply subject cannot name the next request's.
    const token = nuid.next();
    return new Promise<Msg>((resolve, reject) => {
      const timer = setTimeout(() => {
        const waiting = this.waiting.get(token);
        if (waiting) this.settle(token, waiting, new NoReplyError('TIMEOUT', subject));
      }, options.timeoutMs);
      timer.unref();
      const waiting = { resolve, reject, timer, subject };
      this.waiting.set(token, waiting);
      try {
        this.nc.publish(subject, data, {
          reply: `${this.base}.${token}`,
          ...(options.headers ? { headers: options.headers } : {}),
        });
      } catch (error) {
        this.settle(token, waiting, error as Error);
      }
    });
  }

  private answered(message: Msg): void {
    const token = message.subject.slice(this.base.length + 1);
    const waiting = this.waiting.get(token);
    if (!waiting) return;
    // The server's status message when nobody listens on the subject (nats.js turns it into NoResponders).
    const noResponders = message.data.length === 0 && message.headers?.code === 503;
    this.settle(token, waiting, noResponders ? new NoReplyError('503', waiting.subject) : undefined, message);
  }

  /** The server refuses a publish this user may not make with an -ERR naming the subject, never with a reply. */
  private async watchRefusedPublishes(): Promise<void> {
    for await (const status of this.nc.status()) {
      const refused = (status as { permissionContext?: { operation: string; subject: string } })
        .permissionContext;
      if (status.type === 'error' && refused?.operation === 'publish') {
        this.refuseWaiting('PERMISSIONS_VIOLATION', (subject) => subject === refused.subject);
      }
    }
  }

  private refuseWaiting(code: NoReplyError['code'], refuses: (subject: string) => boolean): void {
    for (const [token, waiting] of this.waiting) {
      if (refuses(waiting.subject)) this.settle(token, waiting, new NoReplyError(code, waiting.subject));
    }
  }

  private settle(token: string, waiting: Waiting, error: Error | undefined, message?: Msg): void {
    clearTimeout(waiting.timer);
    this.waiting.delete(token);
    if (error) waiting.reject(error);
    else waiting.resolve(message!);
  }
}

const inboxes = new WeakMap<NatsConnection, ReplyInbox>();

/** A request-reply over the connection's shared reply inbox (made on first use). */
export function requestReply(
  bus: Pick<Bus, 'nc' | 'inboxPrefix'>,
  subject: string,
  data: Uint8Array,
  options: { timeoutMs: number; headers?: MsgHdrs },
): Promise<Msg> {
  const { nc } = bus;
  let inbox = inboxes.get(nc);
  if (!inbox || inbox.closed) {
    if (nc.isClosed()) return Promise.reject(new NoReplyError('CONNECTION_CLOSED', subject));
    inbox = new ReplyInbox(nc, bus.inboxPrefix);
    inboxes.set(nc, inbox);
  }
  return inbox.request(subject, data, options);
}
