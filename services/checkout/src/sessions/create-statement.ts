import pg from 'pg';
import type { CheckoutConfig } from '../config';
import type { SessionRow } from '../db';
import type { IdempotencyClaim } from './sessions';

// Named prepared statements on a pool of their own (parsed once per connection); Kysely cannot name a statement.

/** Connections for session creation, in addition to the service's main pool. */
const CREATE_POOL_SIZE = 8;
const STATEMENT_TIMEOUT_MS = 15_000;

/** The seller's open-session cap ($14; 0 is no cap and skips the count), the count stopping at the cap. */
const OPEN_SESSION_CAP = `($14::bigint = 0 or (select count(*) from (select 1 from sessions o
           where o.seller_id = $2::text and o.status = 'open' and o.expires_at > $9::timestamptz
           limit $14::bigint) o) < $14::bigint)`;

/**
 * A session at price + the first free suffix after $12 (the partial unique index sessions_reserved_amount decides)
 * and its outbox row, given the allocated amount. $1..$11 the session, $13 suffixes, $14/$15 the seller's caps
 * (0: none), $16..$18 the event.
 */
const CREATE_AMOUNT_SESSION = `
  with created as (
    insert into sessions (session_id, seller_id, skill_id, skill_name, endpoint_id, description, price_micro,
      exact_amount_micro, status, hold_period_hours, created_at, expires_at, late_until, amount_reserved, updated_at)
    select $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bigint, $7::bigint + c.suffix, 'open',
      $8::int, $9::timestamptz, $10::timestamptz, $11::timestamptz, true, $9::timestamptz
    from (select 1 + (($12::bigint + g) % $13::bigint) as suffix from generate_series(0, $13::bigint - 1) g) c
    where not exists (
      select 1 from sessions x where x.amount_reserved and x.exact_amount_micro = $7::bigint + c.suffix
    )
      -- The seller's caps (limits.ts), each count stopping at its cap; 0 is no cap and skips the count.
      and ${OPEN_SESSION_CAP}
      and ($15::bigint = 0 or (select count(*) from (select 1 from sessions h
           where h.seller_id = $2::text and h.amount_reserved and h.transfer_id is null
             and h.exact_amount_micro between $7::bigint + 1 and $7::bigint + $13::bigint
           limit $15::bigint) h) < $15::bigint)
    limit 1
    on conflict (exact_amount_micro) where amount_reserved do nothing
    returning session_id, seller_id, exact_amount_micro
  ), event as (
    insert into outbox (id, subject, envelope, published_at)
    select $16::text, $17::text,
      jsonb_set($18::jsonb, '{data,exactAmount}',
        to_jsonb((exact_amount_micro / 1000000)::text || '.' || lpad((exact_amount_micro % 1000000)::text, 6, '0'))),
      null
    from created
  )`;

/**
 * A session at its own deposit address with both outbox rows, so no address reaches a buyer unheard of.
 * $12/$13 address and index, $14 the open-session cap, $15..$17 and $18..$20 the two events.
 */
const CREATE_DEPOSIT_SESSION = `
  with created as (
    insert into sessions (session_id, seller_id, skill_id, skill_name, endpoint_id, description, price_micro,
      exact_amount_micro, status, hold_period_hours, created_at, expires_at, late_until, amount_reserved, updated_at,
      deposit_address, derivation_index)
    select $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bigint, $7::bigint, 'open',
      $8::int, $9::timestamptz, $10::timestamptz, $11::timestamptz, false, $9::timestamptz, $12::text, $13::bigint
    where ${OPEN_SESSION_CAP}
    returning session_id, seller_id
  ), events as (
    insert into outbox (id, subject, envelope, published_at)
    select e.id, e.subject, e.envelope, null
    from created, (values ($15::text, $16::text, $17::jsonb), ($18::text, $19::text, $20::jsonb)) e(id, subject, envelope)
  )`;

/** Each statement without and with the idempotency record: the key and request hash follow its last parameter. */
function withAndWithoutKey(base: string, last: number, result: string): readonly [string, string] {
  const idempotency = `, idempotency as (
    insert into idempotency_keys (seller_id, idempotency_key, request_hash, session_id, created_at)
    select seller_id, $${last + 1}::text, $${last + 2}::text, session_id, $9::timestamptz from created
  )`;
  const select = `\n  select ${result} from created`;
  return [`${base}${select}`, `${base}${idempotency}${select}`];
}

const STATEMENTS = {
  amount: withAndWithoutKey(CREATE_AMOUNT_SESSION, 18, 'exact_amount_micro'),
  deposit: withAndWithoutKey(CREATE_DEPOSIT_SESSION, 20, '1'),
};

/** An event envelope for the outbox row written with the session. */
type OutboxEvent = { id: string; type: string };

/** What both statements record: the new session's row, its event and its Idempotency-Key. */
interface CommonParams {
  row: SessionRow;
  sessionEvent: OutboxEvent;
  idempotency?: IdempotencyClaim;
}

interface AmountSessionParams extends CommonParams {
  /** Where the search for a free suffix starts (0 .. suffixes-1). */
  start: number;
  /** Suffixes 1 .. suffixes micro-USDC. */
  suffixes: number;
  /** The seller's cap on its unpaid sessions among this price's amounts (0: none). */
  maxHeldAmounts: number;
}

const commonValues = ({ row }: CommonParams): unknown[] => [
  row.session_id,
  row.seller_id,
  row.skill_id,
  row.skill_name,
  row.endpoint_id,
  row.description,
  row.price_micro,
  row.hold_period_hours,
  row.created_at,
  row.expires_at,
  row.late_until,
];

const eventValues = (event: OutboxEvent) => [event.id, event.type, JSON.stringify(event)];

export class CreateSessionStatement {
  private readonly pool: pg.Pool;
  /** The seller's open-session cap (0: none). */
  private readonly maxOpenSessions: number;

  constructor(config: Pick<CheckoutConfig, 'databaseUrl' | 'dbSchema' | 'maxOpenSessionsPerSeller'>) {
    this.maxOpenSessions = config.maxOpenSessionsPerSeller;
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

  /** The allocated exact amount; undefined when nothing was inserted (a cap, no free amount, or a race). */
  async executeAmount(params: AmountSessionParams): Promise<bigint | undefined> {
    const values: unknown[] = [
      ...commonValues(params),
      params.start,
      params.suffixes,
      this.maxOpenSessions,
      params.maxHeldAmounts,
      ...eventValues(params.sessionEvent),
    ];
    const rows = await this.run('amount', params.idempotency, values);
    const row = rows[0] as [string] | undefined;
    return row ? BigInt(row[0]) : undefined;
  }

  /** Whether the session was inserted (false: the seller's open-session cap). */
  async executeDeposit(params: CommonParams & { addressEvent: OutboxEvent }): Promise<boolean> {
    const values: unknown[] = [
      ...commonValues(params),
      params.row.deposit_address,
      params.row.derivation_index,
      this.maxOpenSessions,
      ...eventValues(params.sessionEvent),
      ...eventValues(params.addressEvent),
    ];
    return (await this.run('deposit', params.idempotency, values)).length > 0;
  }

  private async run(
    kind: keyof typeof STATEMENTS,
    idempotency: IdempotencyClaim | undefined,
    values: unknown[],
  ) {
    const [plain, withKey] = STATEMENTS[kind];
    if (idempotency) values.push(idempotency.key, idempotency.requestHash);
    const name = `checkout_create_${kind}_session${idempotency ? '_idempotent' : ''}`;
    const text = idempotency ? withKey : plain;
    return (await this.pool.query({ name, text, values, rowMode: 'array' })).rows;
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
