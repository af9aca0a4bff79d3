import { Nullable, StringEnum } from '@paygate/contracts';
import { type Static, Type } from '@sinclair/typebox';
import type { Selectable, Transaction } from 'kysely';
import type { NotifierConfig } from '../config';
import { CIRCUIT_STATES, type NotifierDatabase, type NotifierDb, type WebhookCircuitsTable } from '../db';

export type CircuitRow = Selectable<WebhookCircuitsTable>;

/** The target of a delivery: its endpoint, or '' for the account's webhook URL. */
export const targetOf = (endpointId: string | null): string => endpointId ?? '';

export type BreakerPolicy = Pick<
  NotifierConfig,
  'webhookBreakerFailureThreshold' | 'webhookBreakerCooldownMs' | 'webhookBreakerMaxCooldownMs'
>;

/** What an attempt did to its target's circuit: opened it, closed it, or nothing. */
export type CircuitTransition = 'open' | 'closed' | null;

/** The wait before the probe after the circuit opened for the `openCount`th time in a row: doubling, capped. */
function cooldownMs(openCount: number, policy: BreakerPolicy): number {
  return Math.min(
    policy.webhookBreakerCooldownMs * 2 ** Math.min(Math.max(openCount - 1, 0), 30),
    policy.webhookBreakerMaxCooldownMs,
  );
}

/** In the attempt's transaction: the threshold reached or a failed probe opens it; any answer closes it. */
export async function recordCircuitOutcome(
  trx: Transaction<NotifierDatabase>,
  at: { sellerId: string; target: string; now: Date; failed: boolean; error: string | null },
  policy: BreakerPolicy,
): Promise<CircuitTransition> {
  if (!at.failed) return closeCircuit(trx, at);
  const row = await trx
    .insertInto('webhook_circuits')
    .values({
      seller_id: at.sellerId,
      target: at.target,
      state: 'closed',
      consecutive_failures: 1,
      last_error: at.error,
      updated_at: at.now,
    })
    .onConflict((oc) =>
      oc.columns(['seller_id', 'target']).doUpdateSet((eb) => ({
        consecutive_failures: eb('webhook_circuits.consecutive_failures', '+', 1),
        last_error: at.error,
        updated_at: at.now,
      })),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
  const opens =
    row.state === 'half_open' ||
    (row.state === 'closed' && row.consecutive_failures >= policy.webhookBreakerFailureThreshold);
  if (!opens) return null;
  const openCount = row.open_count + 1;
  await trx
    .updateTable('webhook_circuits')
    .set({
      state: 'open',
      open_count: openCount,
      opened_at: at.now,
      retry_at: new Date(at.now.getTime() + cooldownMs(openCount, policy)),
      probe_until: null,
    })
    .where('seller_id', '=', at.sellerId)
    .where('target', '=', at.target)
    .execute();
  return 'open';
}

/** A target that answered: its circuit closed with a count of zero; 'closed' when it was open or half-open. */
async function closeCircuit(
  trx: Transaction<NotifierDatabase>,
  at: { sellerId: string; target: string; now: Date },
): Promise<CircuitTransition> {
  const current = await trx
    .selectFrom('webhook_circuits')
    .select(['state', 'consecutive_failures'])
    .where('seller_id', '=', at.sellerId)
    .where('target', '=', at.target)
    .forUpdate()
    .executeTakeFirst();
  if (!current || (current.state === 'closed' && current.consecutive_failures === 0)) return null;
  await trx
    .updateTable('webhook_circuits')
    .set({
      state: 'closed',
      consecutive_failures: 0,
      open_count: 0,
      opened_at: null,
      retry_at: null,
      probe_until: null,
      updated_at: at.now,
    })
    .where('seller_id', '=', at.sellerId)
    .where('target', '=', at.target)
    .execute();
  return current.state === 'closed' ? null : 'closed';
}

/** The circuits of these targets of a seller that are not closed (no row: closed). */
export async function circuitsOf(
  db: NotifierDb,
  sellerId: string,
  targets: string[],
): Promise<Map<string, CircuitRow>> {
  if (targets.length === 0) return new Map();
  const rows = await db
    .selectFrom('webhook_circuits')
    .selectAll()
    .where('seller_id', '=', sellerId)
    .where('target', 'in', [...new Set(targets)])
    .execute();
  return new Map(rows.map((row) => [row.target, row]));
}

/** The circuit of one target of a seller; none: closed. */
export async function circuitOf(
  db: NotifierDb,
  sellerId: string,
  target: string,
): Promise<CircuitRow | undefined> {
  return (await circuitsOf(db, sellerId, [target])).get(target);
}

/** How many circuits are not closed (the metric). */
export async function openCircuitCount(db: NotifierDb): Promise<number> {
  const { count } = await db
    .selectFrom('webhook_circuits')
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .where('state', '<>', 'closed')
    .executeTakeFirstOrThrow();
  return Number(count);
}

export const CircuitSchema = Type.Object(
  {
    state: StringEnum(CIRCUIT_STATES),
    consecutiveFailures: Type.Integer({ minimum: 0 }),
    openedAt: Nullable(Type.String({ format: 'date-time' })),
    retryAt: Nullable(
      Type.String({
        format: 'date-time',
        description: 'open: when one probe may go out (nothing is sent before); half-open: the probe is out',
      }),
    ),
    lastError: Nullable(Type.String()),
  },
  {
    description:
      'the breaker of this target (an endpoint, or the account URL): after consecutive failures (timeouts, network errors, 408/429/5xx) it opens and its deliveries are held, not dropped, until a probe succeeds',
  },
);

type CircuitView = Static<typeof CircuitSchema>;

export const iso = (value: Date | string | null) => (value === null ? null : new Date(value).toISOString());

export function circuitView(row: CircuitRow | undefined): CircuitView {
  if (!row)
    return { state: 'closed', consecutiveFailures: 0, openedAt: null, retryAt: null, lastError: null };
  return {
    state: row.state,
    consecutiveFailures: row.consecutive_failures,
    openedAt: iso(row.opened_at),
    retryAt: iso(row.retry_at),
    lastError: row.last_error,
  };
}
