import pg from 'pg';
import type { CheckoutConfig } from '../config';
import type { IdempotencyClaim, NewSession } from './sessions';

/**
 * The session-creation statement as a named prepared statement on a small pool of its own: Postgres parses
 * and analyses it once per connection (and may reuse a generic plan) instead of on every request, and the
 * statement text is not sent again. Kysely cannot name a statement, hence plain pg for this one query.
 */

/** Connections for session creation, in addition to the service's main pool. */
const CREATE_POOL_SIZE = 8;
const STATEMENT_TIMEOUT_MS = 15_000;

/**
 * Inserts a session (its exact amount is its price: the session's own deposit address tells its payment apart)
 * and its two outbox rows, checkout.session_created and deposit.address_assigned, so no address reaches a buyer
 * without the indexer and settlement hearing of it. Returns a row when inserted.
 * $1 session_id, $2 seller_id, $3 skill_id, $4 skill_name, $5 endpoint_id, $6 description, $7 price_micro,
 * $8 hold_period_hours, $9 now, $10 expires_at, $11 late_until, $12 deposit address, $13 derivation index,
 * $14 the seller's open-session cap (0: none), $15/$16/$17 the session event's id, type and JSON, $18/$19/$20 the
 * address event's. Nothing is inserted when the cap is reached (the caller says so).
 */
const CREATE_SESSION = `
  with created as (
    insert into sessions (session_id, seller_id, skill_id, skill_name, endpoint_id, description, price_micro,
      exact_amount_micro, status, hold_period_hours, created_at, expires_at, late_until, amount_reserved, updated_at,
      deposit_address, derivation_index)
    select $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bigint, $7::bigint, 'open',
      $8::int, $9::timestamptz, $10::timestamptz, $11::timestamptz, false, $9::timestamptz, $12::text, $13::bigint
    -- The seller's open-session cap (limits.ts), in the same statement so a creation stays one round trip; the
    -- count stops at the cap (an index range of at most that many entries).
    where ($14::bigint = 0 or (select count(*) from (select 1 from sessions o
           where o.seller_id = $2::text and o.status = 'open' and o.expires_at > $9::timestamptz
           limit $14::bigint) o) < $14::bigint)
    returning session_id, seller_id
  ), events as (
    insert into outbox (id, subject, envelope, published_at)
    select e.id, e.subject, e.envelope, null
    from created, (values ($15::text, $16::text, $17::jsonb), ($18::text, $19::text, $20::jsonb)) e(id, subject, envelope)
  )`;

/** The same, plus the idempotency record: $21 idempotency key, $22 request hash. */
const CREATE_SESSION_IDEMPOTENT = `${CREATE_SESSION}, idempotency as (
    insert into idempotency_keys (seller_id, idempotency_key, request_hash, session_id, created_at)
    select seller_id, $21::text, $22::text, session_id, $9::timestamptz from created
  )
  select 1 from created`;

const CREATE_SESSION_PLAIN = `${CREATE_SESSION}
  select 1 from created`;

interface OutboxEvent {
  id: string;
  type: string;
  json: string;
}

/** A new session's own fields (NewSession) and what the statement records with them. */
export interface CreateSessionParams extends NewSession {
  sessionId: string;
  now: Date;
  expiresAt: Date;
  lateUntil: Date;
  depositAddress: string;
  derivationIndex: number;
  /** The seller's open-session cap (0: none). */
  maxOpenSessions: number;
  sessionEvent: OutboxEvent;
  addressEvent: OutboxEvent;
  idempotency?: IdempotencyClaim;
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

  /** Whether the session was inserted (false: the seller's open-session cap). */
  async execute(params: CreateSessionParams): Promise<boolean> {
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
      params.depositAddress,
      params.derivationIndex,
      params.maxOpenSessions,
      params.sessionEvent.id,
      params.sessionEvent.type,
      params.sessionEvent.json,
      params.addressEvent.id,
      params.addressEvent.type,
      params.addressEvent.json,
    ];
    const idempotent = params.idempotency !== undefined;
    if (params.idempotency) values.push(params.idempotency.key, params.idempotency.requestHash);
    const result = await this.pool.query({
      name: idempotent ? 'checkout_create_session_idempotent' : 'checkout_create_session',
      text: idempotent ? CREATE_SESSION_IDEMPOTENT : CREATE_SESSION_PLAIN,
      values,
      rowMode: 'array',
    });
    return result.rows.length > 0;
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
