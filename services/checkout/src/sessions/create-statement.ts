import pg from 'pg';
import type { CheckoutConfig } from '../config';

/**
 * The session-creation statement as a named prepared statement on a small pool of its own: Postgres parses
 * and analyses it once per connection (and may reuse a generic plan) instead of on every request, and the
 * statement text is not sent again. Kysely cannot name a statement, hence plain pg for this one query.
 */

/** Connections for session creation, in addition to the service's main pool. */
const CREATE_POOL_SIZE = 8;
const STATEMENT_TIMEOUT_MS = 15_000;

/**
 * Inserts a session whose exact amount is price + the first suffix after a random start that no matchable
 * session holds, and its checkout.session_created outbox row (the event JSON gets the allocated amount,
 * formatted like formatUsdcExact). Returns only the allocated amount: the caller knows every other column.
 * $1 session_id, $2 seller_id, $3 skill_id, $4 skill_name, $5 endpoint_id, $6 description, $7 price_micro,
 * $8 hold_period_hours, $9 now, $10 expires_at, $11 late_until, $12 start, $13 range size (suffixes),
 * $14 event id, $15 event type, $16 event JSON, $17 the seller's open-session cap, $18 its cap on unpaid
 * reservations among this price's amounts (0: none). Nothing is inserted when a cap is reached (the caller says
 * which).
 */
const CREATE_SESSION = `
  with created as (
    insert into sessions (session_id, seller_id, skill_id, skill_name, endpoint_id, description, price_micro,
      exact_amount_micro, status, hold_period_hours, created_at, expires_at, late_until, amount_reserved, updated_at)
    select $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bigint, $7::bigint + c.suffix, 'open',
      $8::int, $9::timestamptz, $10::timestamptz, $11::timestamptz, true, $9::timestamptz
    from (select 1 + (($12::bigint + generate_series(0, $13::bigint - 1)) % $13::bigint) as suffix) c
    where not exists (
      select 1 from sessions x where x.amount_reserved and x.exact_amount_micro = $7::bigint + c.suffix
    )
      -- The seller's caps (limits.ts), in the same statement so a creation stays one round trip: its open
      -- sessions, and its unpaid reservations among this price's amounts. Each count stops at its cap (an index
      -- range of at most that many entries); 0 is no cap, and the count is then never run.
      and ($17::bigint = 0 or (select count(*) from (select 1 from sessions o
           where o.seller_id = $2::text and o.status = 'open' and o.expires_at > $9::timestamptz
           limit $17::bigint) o) < $17::bigint)
      and ($18::bigint = 0 or (select count(*) from (select 1 from sessions h
           where h.seller_id = $2::text and h.amount_reserved and h.transfer_id is null
             and h.exact_amount_micro between $7::bigint + 1 and $7::bigint + $13::bigint
           limit $18::bigint) h) < $18::bigint)
    limit 1
    on conflict (exact_amount_micro) where amount_reserved do nothing
    returning session_id, seller_id, exact_amount_micro
  ), event as (
    insert into outbox (id, subject, envelope, published_at)
    select $14::text, $15::text,
      jsonb_set($16::jsonb, '{data,exactAmount}',
        to_jsonb((exact_amount_micro / 1000000)::text || '.' || lpad((exact_amount_micro % 1000000)::text, 6, '0'))),
      null
    from created
  )`;

/** The same, plus the idempotency record: $19 idempotency key, $20 request hash. */
const CREATE_SESSION_IDEMPOTENT = `${CREATE_SESSION}, idempotency as (
    insert into idempotency_keys (seller_id, idempotency_key, request_hash, session_id, created_at)
    select seller_id, $19::text, $20::text, session_id, $9::timestamptz from created
  )
  select exact_amount_micro from created`;

const CREATE_SESSION_PLAIN = `${CREATE_SESSION}
  select exact_amount_micro from created`;

export interface CreateSessionParams {
  sessionId: string;
  sellerId: string;
  skillId: string | null;
  skillName: string | null;
  endpointId: string | null;
  description: string;
  priceMicro: bigint;
  holdPeriodHours: number;
  now: Date;
  expiresAt: Date;
  lateUntil: Date;
  start: number;
  rangeSize: number;
  eventId: string;
  eventType: string;
  eventJson: string;
  /** The seller's caps (limits.ts `sellerCaps`). */
  maxOpenSessions: number;
  maxUnpaidInRange: number;
  idempotency?: { key: string; requestHash: string };
}

export class CreateSessionStatement {
  private readonly pool: pg.Pool;

  constructor(config: Pick<CheckoutConfig, 'databaseUrl' | 'dbSchema'>) {
    this.pool = new pg.Pool({
      connectionString: config.databaseUrl,
      max: CREATE_POOL_SIZE,
      connectionTimeoutMillis: 5000,
      // Kept open through quiet spells: a new connection would also have to prepare the statement again.
      idleTimeoutMillis: 600_000,
      allowExitOnIdle: true,
      options: `-c search_path=${config.dbSchema} -c statement_timeout=${STATEMENT_TIMEOUT_MS}`,
    });
    this.pool.on('error', () => undefined); // a dropped idle client is replaced on next use
  }

  /** The allocated exact amount, or undefined when nothing was inserted (no free amount, or a race lost). */
  async execute(params: CreateSessionParams): Promise<bigint | undefined> {
    const values: unknown[] = [
      params.sessionId,
      params.sellerId,
      params.skillId,
      params.skillName,
      params.endpointId,
      params.description,
      params.priceMicro,
      params.holdPeriodHours,
      params.now,
      params.expiresAt,
      params.lateUntil,
      params.start,
      params.rangeSize,
      params.eventId,
      params.eventType,
      params.eventJson,
      params.maxOpenSessions,
      params.maxUnpaidInRange,
    ];
    const idempotent = params.idempotency !== undefined;
    if (params.idempotency) values.push(params.idempotency.key, params.idempotency.requestHash);
    const result = await this.pool.query<[bigint | string]>({
      name: idempotent ? 'checkout_create_session_idempotent' : 'checkout_create_session',
      text: idempotent ? CREATE_SESSION_IDEMPOTENT : CREATE_SESSION_PLAIN,
      values,
      rowMode: 'array',
    });
    const cell = result.rows[0]?.[0];
    return cell === undefined ? undefined : BigInt(cell);
  }

  /** Opens the pool's connections ahead of the first requests (best effort: a failure shows up on use). */
  async warm(): Promise<void> {
    const clients = await Promise.all(
      Array.from({ length: CREATE_POOL_SIZE }, () => this.pool.connect().catch(() => undefined)),
    );
    for (const client of clients) client?.release();
  }

  async close(): Promise<void> {
    await this.pool.end().catch(() => undefined);
  }
}
