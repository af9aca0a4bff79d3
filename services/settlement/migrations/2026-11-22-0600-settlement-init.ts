import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Settlement schema: the seller projection, settlements (one per seller and period), refunds, and the
 * outgoing on-chain transfers that carry both. Frozen: never edit, add a new migration instead.
 */
export const settlementInit: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table sellers (
        seller_id text primary key,
        revision integer not null check (revision >= 1),
        payout_address text not null check (payout_address ~ '^0x[0-9a-fA-F]{40}$'),
        settlement_frequency text not null check (settlement_frequency in ('DAILY', 'WEEKLY', 'MONTHLY')),
        minimum_settlement_micro bigint not null check (minimum_settlement_micro >= 0),
        -- Period key of the last period a settlement was created for (or in which the seller appeared).
        last_scheduled_period text not null,
        updated_at timestamptz not null default now()
      )`.execute(db);

    await sql`
      create table outgoing_transfers (
        transfer_id text primary key,
        kind text not null check (kind in ('payout', 'refund')),
        idempotency_key text not null,
        chain_id integer not null,
        token_address text not null,
        from_address text not null,
        to_address text not null check (to_address ~ '^0x[0-9a-fA-F]{40}$'),
        amount_micro bigint not null check (amount_micro > 0),
        status text not null check (status in ('created', 'signed', 'broadcast', 'confirmed', 'failed')),
        nonce bigint check (nonce >= 0),
        raw_tx text,
        tx_hash text unique,
        block_number bigint,
        preflight_attempts integer not null default 0,
        broadcast_attempts integer not null default 0,
        last_error text,
        next_attempt_at timestamptz not null default now(),
        created_at timestamptz not null default now(),
        signed_at timestamptz,
        last_broadcast_at timestamptz,
        confirmed_at timestamptz,
        failed_at timestamptz,
        unique (kind, idempotency_key),
        unique (chain_id, from_address, nonce),
        check (status <> 'created' or (raw_tx is null and tx_hash is null and nonce is null)),
        check (status not in ('signed', 'broadcast', 'confirmed')
               or (raw_tx is not null and tx_hash is not null and nonce is not null)),
        check (status <> 'confirmed' or (confirmed_at is not null and block_number is not null))
      )`.execute(db);
    await sql`create index outgoing_transfers_open on outgoing_transfers (nonce)
      where status in ('signed', 'broadcast')`.execute(db);
    await sql`create index outgoing_transfers_created on outgoing_transfers (next_attempt_at)
      where status = 'created'`.execute(db);
    // Never signed twice: once a transaction is signed, its bytes, hash, nonce, recipient and amount are frozen,
    // and a finished transfer never changes state again.
    await sql`
      create function outgoing_transfers_guard() returns trigger language plpgsql as $$
      begin
        if old.raw_tx is not null and (new.raw_tx is distinct from old.raw_tx
            or new.tx_hash is distinct from old.tx_hash or new.nonce is distinct from old.nonce) then
          raise exception 'outgoing transfer %: a signed transaction is immutable', old.transfer_id;
        end if;
        if new.amount_micro <> old.amount_micro or new.to_address <> old.to_address
            or new.kind <> old.kind or new.idempotency_key <> old.idempotency_key then
          raise exception 'outgoing transfer %: recipient and amount are immutable', old.transfer_id;
        end if;
        if old.status in ('confirmed', 'failed') and new.status <> old.status then
          raise exception 'outgoing transfer %: % is final', old.transfer_id, old.status;
        end if;
        return new;
      end $$`.execute(db);
    await sql`create trigger outgoing_transfers_guard before update on outgoing_transfers
      for each row execute function outgoing_transfers_guard()`.execute(db);
    await sql`
      create function outgoing_transfers_no_delete() returns trigger language plpgsql as $$
      begin
        raise exception 'outgoing transfers are never deleted';
      end $$`.execute(db);
    await sql`create trigger outgoing_transfers_no_delete before delete on outgoing_transfers
      for each row execute function outgoing_transfers_no_delete()`.execute(db);

    await sql`
      create table settlements (
        settlement_id text primary key,
        seller_id text not null,
        period_key text not null,
        frequency text not null check (frequency in ('DAILY', 'WEEKLY', 'MONTHLY')),
        period_start timestamptz not null,
        period_end timestamptz not null check (period_end > period_start),
        status text not null check (status in ('pending', 'skipped', 'sending', 'completed', 'failed')),
        minimum_micro bigint not null check (minimum_micro >= 0),
        available_micro bigint check (available_micro >= 0),
        amount_micro bigint check (amount_micro > 0),
        payout_address text not null check (payout_address ~ '^0x[0-9a-fA-F]{40}$'),
        transfer_id text unique references outgoing_transfers (transfer_id),
        tx_hash text,
        skip_reason text check (skip_reason in ('below_minimum', 'nothing_available')),
        failure_reason text,
        cancel_acknowledged_at timestamptz,
        attempts integer not null default 0,
        next_attempt_at timestamptz not null default now(),
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        completed_at timestamptz,
        unique (seller_id, period_key),
        check (status not in ('sending', 'completed') or (amount_micro is not null and transfer_id is not null)),
        check (status <> 'completed' or (tx_hash is not null and completed_at is not null)),
        check (status <> 'skipped' or skip_reason is not null)
      )`.execute(db);
    await sql`create index settlements_seller on settlements (seller_id, settlement_id desc)`.execute(db);
    await sql`create index settlements_pending on settlements (next_attempt_at) where status = 'pending'`.execute(
      db,
    );
    await sql`create index settlements_uncancelled on settlements (settlement_id)
      where status = 'failed' and cancel_acknowledged_at is null`.execute(db);

    await sql`
      create table refunds (
        refund_id text primary key,
        transaction_id text not null,
        seller_id text not null,
        payer text not null check (payer ~ '^0x[0-9a-fA-F]{40}$'),
        amount_micro bigint not null check (amount_micro > 0),
        chain_id integer not null,
        status text not null check (status in ('sending', 'completed', 'failed')),
        transfer_id text not null unique references outgoing_transfers (transfer_id),
        refund_tx_hash text,
        initiated_at timestamptz not null,
        created_at timestamptz not null default now(),
        completed_at timestamptz,
        check (status <> 'completed' or (refund_tx_hash is not null and completed_at is not null))
      )`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`drop table refunds`.execute(db);
    await sql`drop table settlements`.execute(db);
    await sql`drop table outgoing_transfers`.execute(db);
    await sql`drop function outgoing_transfers_guard() cascade`.execute(db);
    await sql`drop function outgoing_transfers_no_delete() cascade`.execute(db);
    await sql`drop table sellers`.execute(db);
  },
};
