/**
 * Events on their way (invariants 7 and 8): every outbox event reached each of its consumers exactly once, and
 * every webhook event reached the seller's endpoint.
 */
import { CONSUMERS, SUBJECTS, type Subject } from '@paygate/contracts';
import type pg from 'pg';
import { SCHEMAS } from '../service-schemas';
import type { InvariantInputs, InvariantReading } from './invariant-check';

/**
 * Invariant 7: every outbox event reached each of its consumers exactly once (lost / unexpected; the inbox key
 * makes a second application impossible, which checks 3-6 confirm on the money side).
 */
export async function everyOutboxEventReachedEachConsumerOnce({
  client,
}: InvariantInputs): Promise<InvariantReading> {
  let lost = 0;
  let unexpected = 0;
  let checked = 0;
  const problems: string[] = [];
  for (const [service, consumers] of Object.entries(CONSUMERS)) {
    for (const [durable, subject] of Object.entries(consumers as Record<string, Subject>)) {
      const produced = await producedEvents(client, subject);
      const seen = await consumedEvents(client, service, durable);
      checked += produced.size;
      for (const id of produced) {
        if (seen.has(id)) continue;
        lost++;
        problems.push(`${durable} lost ${subject} ${id}`);
      }
      for (const id of seen) {
        if (produced.has(id)) continue;
        unexpected++;
        problems.push(`${durable} unexpected ${id}`);
      }
    }
  }
  return {
    name: `every outbox event reached each consumer exactly once (lost ${lost}, duplicated 0 by key, unexpected ${unexpected})`,
    checked,
    problems,
  };
}

/** The ids of the events of a subject in its producers' outboxes. */
async function producedEvents(client: pg.Client, subject: Subject): Promise<Set<string>> {
  const produced = new Set<string>();
  for (const owner of SUBJECTS[subject].owners as readonly string[]) {
    const rows = await client.query(`select id from ${SCHEMAS[owner]}.outbox where subject = $1`, [subject]);
    for (const row of rows.rows) produced.add(row.id);
  }
  return produced;
}

/** The ids of the events a durable consumer of a service took in. */
async function consumedEvents(client: pg.Client, service: string, durable: string): Promise<Set<string>> {
  const consumed = await client.query(`select event_id from ${SCHEMAS[service]}.inbox where consumer = $1`, [
    durable,
  ]);
  return new Set(consumed.rows.map((r) => r.event_id as string));
}

/** Invariant 8: every webhook event delivered at least once with its event id (and the receiver really has it). */
export async function everyWebhookEventWasDelivered(run: InvariantInputs): Promise<InvariantReading> {
  const events = await run.client.query(
    `select e.event_id, bool_or(d.status = 'delivered') as delivered from notifier.webhook_events e
       join notifier.webhook_deliveries d on d.event_id = e.event_id group by e.event_id`,
  );
  const problems: string[] = [];
  for (const e of events.rows) {
    if (!e.delivered) problems.push(`${e.event_id} not delivered`);
    else if (!run.webhooks.accepted.has(e.event_id))
      problems.push(`${e.event_id} marked delivered, never received`);
  }
  return {
    name: 'every webhook event delivered at least once with its event id',
    checked: events.rowCount ?? 0,
    problems,
  };
}
