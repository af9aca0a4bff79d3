import { type MsgHdrs, headers as natsHeaders } from 'nats';
import type { Bus } from './connection';
import { BusError } from './errors';
import { requestReply } from './reply-inbox';

const decoder = new TextDecoder();

/** The stream refused a publish (its answer's error): `api_error` as nats.js gives it, so isJetStreamError reads it. */
export class StreamPublishError extends BusError {
  override name = 'StreamPublishError';
  constructor(readonly api_error: { code: number; err_code: number; description: string }) {
    super(`stream refused the publish: ${api_error.description} (${api_error.err_code})`);
  }
}

/**
 * One JetStream publish: the message with its Nats-Msg-Id, answered by the stream with its ack. What nats.js's
 * js.publish sends, over the connection's shared reply inbox (reply-inbox.ts), so an outbox pass of hundreds of
 * publishes builds no Error per ack.
 */
export async function publishToStream(
  bus: Pick<Bus, 'nc' | 'inboxPrefix'>,
  subject: string,
  data: Uint8Array,
  options: { msgID: string; headers?: MsgHdrs; timeoutMs: number },
): Promise<{ stream: string; seq: number; duplicate: boolean }> {
  const headers = options.headers ?? natsHeaders();
  headers.set('Nats-Msg-Id', options.msgID);
  const reply = await requestReply(bus, subject, data, { timeoutMs: options.timeoutMs, headers });
  const ack = JSON.parse(decoder.decode(reply.data)) as {
    stream?: string;
    seq?: number;
    duplicate?: boolean;
    error?: { code: number; err_code: number; description: string };
  };
  if (ack.error) throw new StreamPublishError(ack.error);
  if (typeof ack.stream !== 'string' || typeof ack.seq !== 'number') {
    throw new BusError(
      `not a stream's publish ack on ${subject}: ${decoder.decode(reply.data).slice(0, 200)}`,
    );
  }
  return { stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate === true };
}

export interface DurablePublishOptions {
  /** The event id: JetStream drops a second message with the same id inside the stream's duplicate window. */
  msgID: string;
  headers?: MsgHdrs;
  /** Timeout of one publish attempt. */
  attemptTimeoutMs?: number;
  /**
   * How long attempts go on (same Nats-Msg-Id) before the caller gets the error: longer than a stream leader
   * election (4–7 s measured with 3 replicas), bounded so the caller's loop keeps control.
   */
  retryForMs?: number;
}

/** What a publish ended with: the stream sequence, and under which Nats-Msg-Id the message is in the stream. */
export interface DurablePublishResult {
  seq: number;
  msgID: string;
  /** A duplicate ack, checked against the stream: the first publish had landed. */
  confirmedDuplicate: boolean;
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Publishes to JetStream until the stream has the message, retrying with the same Nats-Msg-Id through
 * reconnects and leader elections (bounded by `retryForMs`).
 *
 * A duplicate ack says the server remembers the id, not that the stream holds the message: an id can be
 * remembered by a leader whose write was lost in an election. So a duplicate ack is checked by reading the
 * sequence it names. When the stream does not hold our message there, the message is published again under a
 * new id (`<id>~<n>`): the event id inside the envelope is unchanged, and every consumer's inbox keys on it.
 */
export async function publishDurably(
  bus: Pick<Bus, 'nc' | 'inboxPrefix' | 'jsm' | 'eventsStream'>,
  subject: string,
  data: Uint8Array,
  options: DurablePublishOptions,
): Promise<DurablePublishResult> {
  const attemptTimeoutMs = options.attemptTimeoutMs ?? 5000;
  const deadline = Date.now() + (options.retryForMs ?? 30_000);
  let msgID = options.msgID;
  let unconfirmedDuplicates = 0;
  let backoffMs = 100;
  let lastError: unknown;
  for (let attempt = 0; attempt < 1000; attempt++) {
    try {
      const ack = await publishToStream(bus, subject, data, {
        msgID,
        ...(options.headers ? { headers: options.headers } : {}),
        timeoutMs: attemptTimeoutMs,
      });
      if (!ack.duplicate) return { seq: ack.seq, msgID, confirmedDuplicate: false };
      if (await streamHolds(bus, ack.seq, msgID, attemptTimeoutMs)) {
        return { seq: ack.seq, msgID, confirmedDuplicate: true };
      }
      // The original may still be in flight (being replicated): wait and ask again a few times before deciding
      // it was lost and publishing under a new id.
      unconfirmedDuplicates++;
      if (unconfirmedDuplicates >= 3) {
        msgID = `${options.msgID}~${attempt + 1}`;
        unconfirmedDuplicates = 0;
      }
      lastError = new Error(`duplicate ack for ${msgID} at seq ${ack.seq} not found in the stream`);
    } catch (error) {
      lastError = error;
    }
    if (Date.now() + backoffMs > deadline) break;
    await delay(backoffMs);
    backoffMs = Math.min(backoffMs * 2, 2000);
  }
  throw lastError instanceof Error ? lastError : new Error(String(lastError));
}

/** Whether the stream holds, at `seq`, the message published with `msgID`. */
async function streamHolds(
  bus: Pick<Bus, 'jsm' | 'eventsStream'>,
  seq: number,
  msgID: string,
  timeoutMs: number,
): Promise<boolean> {
  if (!seq) return false;
  const lookup = bus.jsm.streams.getMessage(bus.eventsStream, { seq });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('stream message lookup timed out')), timeoutMs);
  });
  try {
    const message = await Promise.race([lookup, timeout]);
    return message.header.get('Nats-Msg-Id') === msgID;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
