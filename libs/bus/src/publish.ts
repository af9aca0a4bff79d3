import { type MsgHdrs, headers as natsHeaders } from 'nats';
import type { Bus } from './connection';
import { BusError } from './errors';
import { requestReply } from './reply-inbox';
import { withTimeout } from './timeout';

const decoder = new TextDecoder();

type ApiError = { code: number; err_code: number; description: string };

/** The stream refused a publish: `api_error` as nats.js gives it, so isJetStreamError reads it. */
export class StreamPublishError extends BusError {
  override name = 'StreamPublishError';
  constructor(readonly api_error: ApiError) {
    super(`stream refused the publish: ${api_error.description} (${api_error.err_code})`);
  }
}

/**
 * One JetStream publish with its Nats-Msg-Id, as nats.js's js.publish sends it but over the shared reply inbox
 * (reply-inbox.ts), so an outbox pass of hundreds of publishes builds no Error per ack.
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
    error?: ApiError;
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
  attemptTimeoutMs?: number;
  /** How long attempts go on (same Nats-Msg-Id): past a leader election (4–7 s with 3 replicas), but bounded. */
  retryForMs?: number;
}

/** What a publish ended with: the stream sequence, and under which Nats-Msg-Id the message is in the stream. */
export interface DurablePublishResult {
  seq: number;
  msgID: string;
  /** A duplicate ack, checked against the stream: the first publish had landed. */
  confirmedDuplicate: boolean;
}

/**
 * Publishes until the stream has the message, retrying with the same Nats-Msg-Id through reconnects and leader
 * elections (bounded by `retryForMs`). A duplicate ack only says the id is remembered (a leader's write can be
 * lost in an election), so the sequence it names is read back; when that is not our message it goes again as
 * `<id>~<n>` (each inbox keys on the envelope's event id, which is unchanged).
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
      // The original may still be replicating: ask again a few times before publishing under a new id.
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
    await new Promise((resolve) => setTimeout(resolve, backoffMs));
    backoffMs = Math.min(backoffMs * 2, 2000);
  }
  throw lastError instanceof Error ? lastError : new Error(String(lastError));
}

async function streamHolds(
  bus: Pick<Bus, 'jsm' | 'eventsStream'>,
  seq: number,
  msgID: string,
  timeoutMs: number,
): Promise<boolean> {
  if (!seq) return false;
  const lookup = bus.jsm.streams.getMessage(bus.eventsStream, { seq });
  try {
    const message = await withTimeout(lookup, timeoutMs, () => new Error('stream message lookup timed out'));
    return message.header.get('Nats-Msg-Id') === msgID;
  } catch {
    return false;
  }
}
