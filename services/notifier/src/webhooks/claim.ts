import { type Kysely, sql, type Transaction } from 'kysely';
import type { NotifierConfig } from '../config';
import type { NotifierDatabase } from '../db';
import type { CircuitRow } from './circuits';

/** (seller, target) queues one pass scans at most (one index probe each); the cursor continues from there. */
const MAX_TARGETS_SCANNED_PER_PASS = 2000;

/** `limit`: the free sending slots (at most the batch); `after`: the seller the previous pass ended on. */
type FairClaimOptions = Pick<
  NotifierConfig,
  | 'webhookClaimLeaseMs'
  | 'webhookSellerShare'
  | 'webhookEndpointShare'
  | 'webhookSellerMaxInFlight'
  | 'webhookEndpointMaxInFlight'
> & { now: Date; limit: number; after: string | null };

/** `probes`: half-open circuits this pass sent their one probe to; `cursor`: where the next pass starts. */
type FairClaim = { deliveries: ClaimedDelivery[]; probes: number; cursor: string | null };

interface DueTarget {
  seller_id: string;
  target: string;
  next_at: Date;
}

/** Leases due deliveries round robin over sellers within shares and caps (locked: exact in-flight counts). */
export async function claimFairly(
  db: Kysely<NotifierDatabase>,
  options: FairClaimOptions,
): Promise<FairClaim> {
  return db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(hashtextextended('notifier-webhook-claim', 0))`.execute(trx);
    const { targets, exhausted } = await dueTargets(trx, options);
    if (targets.length === 0) return { deliveries: [], probes: 0, cursor: exhausted ?? options.after };
    const sellers = [...new Set(targets.map((t) => t.seller_id))];
    const circuits = await openCircuits(trx, sellers);
    const inFlight = await inFlightCounts(trx, sellers, options.now);
    const { wanted, remaining, cursor: lastServed } = shareOut(targets, circuits, inFlight, options);
    // Not filled because the scan budget ran out: the next pass goes on from where the scan stopped.
    const cursor = remaining > 0 && exhausted !== null ? exhausted : lastServed;
    if (wanted.length === 0) return { deliveries: [], probes: 0, cursor };
    const ids = await takeRows(trx, wanted, options.now);
    if (ids.length === 0) return { deliveries: [], probes: 0, cursor };
    const probes = await lease(trx, ids, wanted, options);
    return { deliveries: await claimedRows(trx, ids), probes, cursor };
  });
}

type WantedQueue = { sellerId: string; target: string; quota: number; probe: boolean };
type TakenRow = { delivery_id: string; seller_id: string; target: string };
const queueKey = (sellerId: string, target: string) => `${sellerId}\u0000${target}`;

/** Each due queue's quota this pass (none while its circuit is open, one as a probe); the cursor is the last served. */
function shareOut(
  targets: DueTarget[],
  circuits: Map<string, CircuitRow>,
  inFlight: { bySeller: Map<string, number>; byTarget: Map<string, number> },
  options: FairClaimOptions,
): { wanted: WantedQueue[]; remaining: number; cursor: string | null } {
  const now = options.now.getTime();
  const takenBySeller = new Map<string, number>();
  const wanted: WantedQueue[] = [];
  let remaining = options.limit;
  let cursor = options.after;
  for (const due of targets) {
    if (remaining === 0) break;
    const key = queueKey(due.seller_id, due.target);
    const circuit = circuits.get(key);
    if (circuit?.state === 'open' && new Date(circuit.retry_at as Date).getTime() > now) continue;
    if (circuit?.state === 'half_open' && new Date(circuit.probe_until as Date).getTime() > now) continue;
    const probe = circuit !== undefined;
    const taken = takenBySeller.get(due.seller_id) ?? 0;
    const sellerRoom = Math.min(
      options.webhookSellerShare - taken,
      options.webhookSellerMaxInFlight - (inFlight.bySeller.get(due.seller_id) ?? 0) - taken,
    );
    const targetRoom = Math.min(
      options.webhookEndpointShare,
      options.webhookEndpointMaxInFlight - (inFlight.byTarget.get(key) ?? 0),
    );
    const quota = Math.min(remaining, sellerRoom, targetRoom, probe ? 1 : Number.MAX_SAFE_INTEGER);
    if (quota <= 0) continue;
    wanted.push({ sellerId: due.seller_id, target: due.target, quota, probe });
    takenBySeller.set(due.seller_id, taken + quota);
    remaining -= quota;
    cursor = due.seller_id;
  }
  return { wanted, remaining, cursor };
}

/** Leases the rows taken, and marks the circuits probed half-open until the lease ends; how many were probed. */
async function lease(
  trx: Transaction<NotifierDatabase>,
  ids: TakenRow[],
  wanted: WantedQueue[],
  options: FairClaimOptions,
): Promise<number> {
  const leasedUntil = new Date(options.now.getTime() + options.webhookClaimLeaseMs);
  const deliveryIds = ids.map((row) => row.delivery_id);
  await trx
    .updateTable('webhook_deliveries')
    .set({ next_attempt_at: leasedUntil, leased_until: leasedUntil })
    .where('delivery_id', 'in', deliveryIds)
    .execute();
  const probed = wanted.filter(
    (w) => w.probe && ids.some((row) => row.seller_id === w.sellerId && row.target === w.target),
  );
  for (const w of probed) {
    await trx
      .updateTable('webhook_circuits')
      .set({ state: 'half_open', probe_until: leasedUntil, updated_at: options.now })
      .where('seller_id', '=', w.sellerId)
      .where('target', '=', w.target)
      .execute();
  }
  return probed.length;
}

/** Queues with a due delivery in ring order from the cursor; `exhausted` is where an out-of-budget scan stopped. */
async function dueTargets(
  trx: Transaction<NotifierDatabase>,
  options: FairClaimOptions,
): Promise<{ targets: DueTarget[]; exhausted: string | null }> {
  const first = await scanTargets(trx, {
    after: options.after,
    upTo: null,
    max: MAX_TARGETS_SCANNED_PER_PASS,
  });
  let scanned = first;
  if (first.length < MAX_TARGETS_SCANNED_PER_PASS && options.after !== null) {
    // The end of the ring: on from the start, up to (and including) the seller the scan began after.
    const rest = await scanTargets(trx, {
      after: null,
      upTo: options.after,
      max: MAX_TARGETS_SCANNED_PER_PASS - first.length,
    });
    scanned = [...first, ...rest];
  }
  const exhausted =
    scanned.length >= MAX_TARGETS_SCANNED_PER_PASS ? (scanned[scanned.length - 1]?.seller_id ?? null) : null;
  const now = options.now.getTime();
  return { targets: scanned.filter((t) => new Date(t.next_at).getTime() <= now), exhausted };
}

/** A skip-scan of webhook_deliveries_target_due: each pending (seller, target) once, with its earliest time. */
async function scanTargets(
  trx: Transaction<NotifierDatabase>,
  range: { after: string | null; upTo: string | null; max: number },
): Promise<DueTarget[]> {
  const after = range.after ?? '';
  const upTo = (column: string) =>
    range.upTo === null ? sql`` : sql`and ${sql.ref(column)} <= ${range.upTo}`;
  const result = await sql<DueTarget>`
    with recursive targets (seller_id, target, next_at, n) as (
      (select d.seller_id, coalesce(d.endpoint_id, ''), d.next_attempt_at, 1
         from webhook_deliveries d
        where d.status = 'pending' and d.seller_id > ${after} ${upTo('d.seller_id')}
        order by d.seller_id, coalesce(d.endpoint_id, ''), d.next_attempt_at
        limit 1)
      union all
      (select nxt.seller_id, nxt.target, nxt.next_at, t.n + 1
         from targets t
         cross join lateral (
           select d.seller_id, coalesce(d.endpoint_id, '') as target, d.next_attempt_at as next_at
             from webhook_deliveries d
            where d.status = 'pending'
              and (d.seller_id, coalesce(d.endpoint_id, '')) > (t.seller_id, t.target)
              ${upTo('d.seller_id')}
            order by d.seller_id, coalesce(d.endpoint_id, ''), d.next_attempt_at
            limit 1) nxt
        where t.n < ${range.max})
    )
    select seller_id, target, next_at from targets`.execute(trx);
  return result.rows;
}

/** The circuits of these sellers that are not closed, by `seller\0target`. */
async function openCircuits(
  trx: Transaction<NotifierDatabase>,
  sellers: string[],
): Promise<Map<string, CircuitRow>> {
  const rows = await trx
    .selectFrom('webhook_circuits')
    .selectAll()
    .where('seller_id', 'in', sellers)
    .where('state', '<>', 'closed')
    .execute();
  return new Map(rows.map((row) => [queueKey(row.seller_id, row.target), row]));
}

/** Deliveries being sent now (lease not over), by seller and by `seller\0target`. */
async function inFlightCounts(
  trx: Transaction<NotifierDatabase>,
  sellers: string[],
  now: Date,
): Promise<{ bySeller: Map<string, number>; byTarget: Map<string, number> }> {
  const rows = await trx
    .selectFrom('webhook_deliveries')
    .select((eb) => [
      'seller_id',
      sql<string>`coalesce(endpoint_id, '')`.as('target'),
      eb.fn.countAll<string>().as('count'),
    ])
    .where('seller_id', 'in', sellers)
    .where('leased_until', '>', now)
    .groupBy(['seller_id', sql`coalesce(endpoint_id, '')`])
    .execute();
  const bySeller = new Map<string, number>();
  const byTarget = new Map<string, number>();
  for (const row of rows) {
    bySeller.set(row.seller_id, (bySeller.get(row.seller_id) ?? 0) + Number(row.count));
    byTarget.set(queueKey(row.seller_id, row.target), Number(row.count));
  }
  return { bySeller, byTarget };
}

/** The earliest due rows of each chosen queue, as many as its quota, locked (SKIP LOCKED) for the lease. */
async function takeRows(
  trx: Transaction<NotifierDatabase>,
  wanted: WantedQueue[],
  now: Date,
): Promise<TakenRow[]> {
  const values = sql.join(wanted.map((w) => sql`(${w.sellerId}::text, ${w.target}::text, ${w.quota}::int)`));
  const result = await sql<TakenRow>`
    select d.delivery_id, w.seller_id, w.target
      from (values ${values}) as w (seller_id, target, quota)
      cross join lateral (
        select delivery_id
          from webhook_deliveries
         where status = 'pending'
           and seller_id = w.seller_id
           and coalesce(endpoint_id, '') = w.target
           and next_attempt_at <= ${now}
         order by next_attempt_at
         limit w.quota
         for update skip locked) d`.execute(trx);
  return result.rows;
}

/** What the dispatcher sends; an endpoint's delivery is signed with the endpoint's own secret (this version). */
export type ClaimedDelivery = Awaited<ReturnType<typeof claimedRows>>[number];

/** What the dispatcher needs to send each claimed delivery: body, target, secret versions. */
async function claimedRows(trx: Transaction<NotifierDatabase>, ids: TakenRow[]) {
  const rows = await trx
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.event_id', 'd.event_id')
    .leftJoin('sellers as s', 's.seller_id', 'd.seller_id')
    .leftJoin('webhook_endpoints as w', 'w.endpoint_id', 'd.endpoint_id')
    .select([
      'd.endpoint_id',
      'w.secret_version as endpointSecretVersion',
      'd.delivery_id as deliveryId',
      'd.event_id as eventId',
      'e.event_type as eventType',
      'd.seller_id as sellerId',
      'd.url',
      'e.body',
      'e.traceparent',
      'd.attempt_count as attemptCount',
      'd.give_up_at as giveUpAt',
      's.webhook_secret_version',
    ])
    .where(
      'd.delivery_id',
      'in',
      ids.map((row) => row.delivery_id),
    )
    .orderBy('d.delivery_id')
    .execute();
  return rows.map(({ endpoint_id, endpointSecretVersion, webhook_secret_version, ...row }) => ({
    ...row,
    secretVersion: webhook_secret_version ?? 0,
    endpoint: endpoint_id ? { id: endpoint_id, secretVersion: endpointSecretVersion ?? 1 } : null,
  }));
}

/** Fails deliveries whose retry window ended behind an open circuit (never pending for ever; redeliverable). */
export async function failExpiredHeld(
  db: Kysely<NotifierDatabase>,
  options: { now: Date; limit: number },
): Promise<number> {
  const result = await sql`
    update webhook_deliveries
       set status = 'failed', next_attempt_at = null,
           last_error = 'retry window ended while the endpoint''s circuit was open (it kept failing); not sent again: redeliver once it answers'
     where delivery_id in (
       select d.delivery_id
         from webhook_deliveries d
         join webhook_circuits c
           on c.seller_id = d.seller_id and c.target = coalesce(d.endpoint_id, '') and c.state <> 'closed'
        where d.status = 'pending'
          and d.give_up_at <= ${options.now}
          and (d.leased_until is null or d.leased_until <= ${options.now})
        order by d.give_up_at
        limit ${options.limit}
        for update of d skip locked)`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
