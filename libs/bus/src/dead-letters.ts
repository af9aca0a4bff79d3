import { headers as natsHeaders } from 'nats';
import type { Bus } from './connection';
import { DeadLetterError } from './errors';

export interface DeadLetter {
  sequence: number;
  consumer: string;
  originalSubject: string;
  error: string;
  attempts: number;
  storedAt: string;
  envelope: unknown;
}

const decoder = new TextDecoder();

/** Lists parked events (oldest first, bounded), for an operator to inspect. */
export async function listDeadLetters(bus: Bus, options: { limit?: number } = {}): Promise<DeadLetter[]> {
  const limit = Math.min(options.limit ?? 100, 1000);
  const info = await bus.jsm.streams.info(bus.deadLetterStream);
  const result: DeadLetter[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && result.length < limit; seq++) {
    const message = await bus.jsm.streams.getMessage(bus.deadLetterStream, { seq }).catch(() => undefined);
    if (!message) continue; // deleted after a replay
    let envelope: unknown;
    try {
      envelope = JSON.parse(decoder.decode(message.data));
    } catch {
      envelope = decoder.decode(message.data);
    }
    result.push({
      sequence: seq,
      consumer: message.header.get('Paygate-Consumer'),
      originalSubject: message.header.get('Paygate-Original-Subject'),
      error: message.header.get('Paygate-Error'),
      attempts: Number(message.header.get('Paygate-Attempts') || 0),
      storedAt: message.time.toISOString(),
      envelope,
    });
  }
  return result;
}

/** Publishes a parked event again on its original subject (inboxes skip it where done), then drops it. */
export async function replayDeadLetter(bus: Bus, sequence: number): Promise<void> {
  const message = await bus.jsm.streams.getMessage(bus.deadLetterStream, { seq: sequence });
  const originalSubject = message.header.get('Paygate-Original-Subject');
  if (!originalSubject) throw new DeadLetterError(`dead letter ${sequence} has no original subject`);
  const headers = natsHeaders();
  headers.set('Paygate-Replayed-From', String(sequence));
  await bus.js.publish(originalSubject, message.data, {
    headers,
    msgID: `replay:${bus.deadLetterStream}:${sequence}`,
  });
  await bus.jsm.streams.deleteMessage(bus.deadLetterStream, sequence);
}
