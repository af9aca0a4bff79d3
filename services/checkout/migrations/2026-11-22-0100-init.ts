import { type Kysely, type Migration, sql } from 'kysely';

/** Checkout schema: projections of registry events, sessions with reserved unique amounts, transfers, payments. */
export const init: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table sellers (
        seller_id text primary key,
        revision integer not null check (revision >= 1),
        publishable_key text not null,
        wallet_address text not null,
        updated_at timestamptz not null
      );
      create unique index sellers_publishable_key on sellers (publishable_key);

      create table skills (
        skill_id text primary key,
        seller_id text not null,
        revision integer not null check (revision >= 1),
        name text not null,
        display_name text not null,
        status text not null,
        hold_period_hours integer not null check (hold_period_hours between 0 and 168),
        endpoints jsonb not null,
        updated_at timestamptz not null
      );
      create index skills_seller_name on skills (seller_id, name);

      create table sessions (
        session_id text primary key,
        seller_id text not null,
        skill_id text,
        skill_name text,
        endpoint_id text,
        description text not null check (length(description) <= 500),
        price_micro bigint not null check (price_micro > 0),
        exact_amount_micro bigint not null check (exact_amount_micro > price_micro),
        status text not null check (status in ('open', 'paid', 'paid_late', 'underpaid', 'overpaid', 'expired')),
        hold_period_hours integer not null check (hold_period_hours between 0 and 168),
        created_at timestamptz not null,
        expires_at timestamptz not null,
        late_until timestamptz not null,
        -- true while a transfer of exact_amount_micro could still match this session (until late_until)
        amount_reserved boolean not null default true,
        paid_amount_micro bigint check (paid_amount_micro > 0),
        transfer_id text,
        tx_hash text,
        payer text,
        paid_at timestamptz,
        updated_at timestamptz not null,
        check (expires_at > created_at and late_until >= expires_at),
        check ((status in ('open', 'expired')) = (transfer_id is null)),
        check ((transfer_id is null) = (paid_amount_micro is null))
      );
      -- The uniqueness of an amount among matchable sessions lives here, not in any process.
      create unique index sessions_reserved_amount on sessions (exact_amount_micro) where amount_reserved;
      create index sessions_open_expiry on sessions (expires_at) where status = 'open';
      create index sessions_reservation_end on sessions (late_until) where amount_reserved;

      create table idempotency_keys (
        seller_id text not null,
        idempotency_key text not null,
        request_hash text not null,
        session_id text not null references sessions (session_id),
        created_at timestamptz not null,
        primary key (seller_id, idempotency_key)
      );

      create table transfers (
        transfer_id text primary key,
        chain_id integer not null,
        network text not null,
        tx_hash text not null,
        log_index integer not null check (log_index >= 0),
        block_number bigint not null,
        block_hash text not null,
        from_address text not null,
        to_address text not null,
        token_address text not null,
        amount_micro bigint not null check (amount_micro >= 0),
        status text not null check (status in ('matched', 'unmatched', 'attached', 'refund_requested', 'reorged')),
        unmatched_reason text,
        candidate_session_id text,
        session_id text references sessions (session_id),
        resolution_note text,
        resolved_at timestamptz,
        observed_at timestamptz not null,
        updated_at timestamptz not null,
        unique (chain_id, tx_hash, log_index),
        check ((status in ('matched', 'attached')) = (session_id is not null))
      );
      create index transfers_status on transfers (status, observed_at);

      create table payments (
        payment_id text primary key,
        session_id text not null references sessions (session_id),
        transfer_id text not null references transfers (transfer_id),
        amount_micro bigint not null check (amount_micro > 0),
        status text not null check (status in ('confirmed', 'reversed')),
        confirmed_at timestamptz not null,
        reversed_at timestamptz
      );
      -- One transfer pays once and a session is paid once, whatever the redeliveries.
      create unique index payments_confirmed_transfer on payments (transfer_id) where status = 'confirmed';
      create unique index payments_confirmed_session on payments (session_id) where status = 'confirmed';
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`drop table payments, transfers, idempotency_keys, sessions, skills, sellers`.execute(db);
  },
};
