import { type Kysely, type Migration, sql } from 'kysely';

/**
 * The settlement schema: the seller projection, settlements (one per seller and period), refunds, platform payouts,
 * the outgoing on-chain transfers that carry them, the relayer's authorizations and refusals, and session deposit
 * addresses with their sweeps into escrow.
 */
export const baseline: Migration = {
  async up(db: Kysely<unknown>) {
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
      );

      -- A relayed or sent transaction is confirmed on its first receipt (an outgoing transfer after CONFIRMATIONS
      -- blocks), but a reorg can still take it off the chain: final_at is set once it is deep enough that no watched
      -- reorg can drop it; until then the sender checks its receipt and broadcasts the same signed bytes again when
      -- it is gone (reorg_rebroadcasts).
      create table outgoing_transfers (
        transfer_id text primary key,
        kind text not null check (kind in ('payout', 'refund', 'platform_payout')),
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
        final_at timestamptz,
        reorg_rebroadcasts integer not null default 0,
        unique (kind, idempotency_key),
        unique (chain_id, from_address, nonce),
        constraint outgoing_transfers_check
          check (status <> 'created' or (raw_tx is null and tx_hash is null and nonce is null)),
        constraint outgoing_transfers_check1 check (status not in ('signed', 'broadcast', 'confirmed')
          or (raw_tx is not null and tx_hash is not null and nonce is not null)),
        constraint outgoing_transfers_check2
          check (status <> 'confirmed' or (confirmed_at is not null and block_number is not null))
      );
      create index outgoing_transfers_open on outgoing_transfers (nonce) where status in ('signed', 'broadcast');
      create index outgoing_transfers_created on outgoing_transfers (next_attempt_at) where status = 'created';
      create index outgoing_transfers_watched on outgoing_transfers (nonce)
        where status = 'confirmed' and final_at is null;
      -- Never signed twice: once a transaction is signed, its bytes, hash, nonce, recipient and amount are frozen,
      -- and a finished transfer never changes state again.
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
      end $$;
      create trigger outgoing_transfers_guard before update on outgoing_transfers
        for each row execute function outgoing_transfers_guard();
      create function outgoing_transfers_no_delete() returns trigger language plpgsql as $$
      begin
        raise exception 'outgoing transfers are never deleted';
      end $$;
      create trigger outgoing_transfers_no_delete before delete on outgoing_transfers
        for each row execute function outgoing_transfers_no_delete();

      -- available_micro is the ledger's answer, negative when refunds after settlement exceed a seller's balance.
      -- Skipped as reservation_cancelled: the ledger gave the reservation back; the money goes out with a later one.
      create table settlements (
        settlement_id text primary key,
        seller_id text not null,
        period_key text not null,
        frequency text not null check (frequency in ('DAILY', 'WEEKLY', 'MONTHLY')),
        period_start timestamptz not null,
        period_end timestamptz not null,
        status text not null check (status in ('pending', 'skipped', 'sending', 'completed', 'failed')),
        minimum_micro bigint not null check (minimum_micro >= 0),
        available_micro bigint,
        amount_micro bigint check (amount_micro > 0),
        payout_address text not null check (payout_address ~ '^0x[0-9a-fA-F]{40}$'),
        transfer_id text unique references outgoing_transfers (transfer_id),
        tx_hash text,
        skip_reason text check (skip_reason in ('below_minimum', 'nothing_available', 'reservation_cancelled')),
        failure_reason text,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        completed_at timestamptz,
        unique (seller_id, period_key),
        constraint settlements_check check (period_end > period_start),
        constraint settlements_check1
          check (status not in ('sending', 'completed') or (amount_micro is not null and transfer_id is not null)),
        constraint settlements_check2 check (status <> 'completed' or (tx_hash is not null and completed_at is not null)),
        constraint settlements_check3 check (status <> 'skipped' or skip_reason is not null)
      );
      create index settlements_seller on settlements (seller_id, settlement_id desc);
      create index settlements_pending on settlements (created_at) where status = 'pending';

      -- A refund of a seller's payment (transaction and seller known), of an unmatched transfer into escrow that an
      -- operator sends back, or of a batch of the ledger's refunds of paid calls their sellers did not serve (one
      -- transfer to a payer). kind comes from refund.initiated and goes back out on refund.completed.
      create table refunds (
        refund_id text primary key,
        transaction_id text,
        seller_id text,
        payer text not null check (payer ~ '^0x[0-9a-fA-F]{40}$'),
        amount_micro bigint not null check (amount_micro > 0),
        chain_id integer not null,
        status text not null check (status in ('sending', 'completed', 'failed')),
        transfer_id text not null unique references outgoing_transfers (transfer_id),
        refund_tx_hash text,
        initiated_at timestamptz not null,
        created_at timestamptz not null default now(),
        completed_at timestamptz,
        kind text not null default 'payment' check (kind in ('payment', 'unmatched_transfer', 'unserved_batch')),
        constraint refunds_check check (status <> 'completed' or (refund_tx_hash is not null and completed_at is not null)),
        constraint refund_kind_ids check ((kind = 'payment') = (transaction_id is not null and seller_id is not null))
      );

      -- EIP-3009 authorizations submitted by the relayer (a pool of gas-only keys, never the escrow key). One row per
      -- authorization (chain, token, payer, nonce): a second submission of the same authorization finds it and never
      -- sends a second transaction. The signed transaction is recorded before it is broadcast; a fee bump re-signs
      -- the same relayer nonce and keeps every earlier hash, since any of them may be the one mined. relayer_address
      -- names the key whose nonce sequence a row is in; payer_code_hash is the payer's code hash when it was
      -- submitted (null for an account without code).
      create table relayed_authorizations (
        id text primary key,
        chain_id integer not null,
        token_address text not null,
        payer text not null,
        auth_nonce text not null check (auth_nonce ~ '^0x[0-9a-f]{64}$'),
        to_address text not null,
        value_micro bigint not null check (value_micro > 0),
        valid_after bigint not null,
        valid_before bigint not null,
        signature text not null,
        status text not null check (status in ('signed', 'broadcast', 'confirmed', 'used_elsewhere', 'failed')),
        relayer_address text not null,
        relayer_nonce bigint,
        gas_limit bigint,
        raw_tx text,
        tx_hash text,
        earlier_tx_hashes text[] not null default '{}',
        max_fee_per_gas numeric(78, 0),
        max_priority_fee_per_gas numeric(78, 0),
        fee_bumps integer not null default 0,
        broadcast_attempts integer not null default 0,
        settled_tx_hash text,
        block_number bigint,
        log_index integer,
        last_error text,
        created_at timestamptz not null default now(),
        signed_at timestamptz,
        last_broadcast_at timestamptz,
        finished_at timestamptz,
        final_at timestamptz,
        reorg_rebroadcasts integer not null default 0,
        payer_code_hash text check (payer_code_hash ~ '^0x[0-9a-f]{64}$'),
        unique (chain_id, token_address, payer, auth_nonce)
      );
      create index relayed_authorizations_open on relayed_authorizations (relayer_nonce)
        where status in ('signed', 'broadcast');
      create unique index relayed_authorizations_relayer_nonce on relayed_authorizations
        (chain_id, relayer_address, relayer_nonce) where relayer_nonce is not null;
      create index relayed_authorizations_watched on relayed_authorizations (relayer_nonce)
        where status = 'confirmed' and final_at is null;
      -- Each relayer key's pass reads its own open rows.
      create index relayed_authorizations_open_by_relayer on relayed_authorizations
        (chain_id, relayer_address, relayer_nonce) where status in ('signed', 'broadcast');

      -- The platform's revenue (its fees) paid out of escrow to the treasury address: requested until the ledger
      -- decides it (refused: nothing to pay), so its amount and transfer are known only then; sent as an outgoing
      -- transfer of kind platform_payout.
      create table platform_payouts (
        payout_id text primary key,
        status text not null check (status in ('requested', 'refused', 'sending', 'completed', 'failed')),
        amount_micro bigint check (amount_micro > 0),
        treasury_address text not null,
        transfer_id text references outgoing_transfers (transfer_id),
        tx_hash text,
        failure_reason text,
        created_at timestamptz not null default now(),
        completed_at timestamptz,
        constraint platform_payouts_sent_check
          check (status in ('requested', 'refused') or (amount_micro is not null and transfer_id is not null))
      );

      -- Session deposit addresses: the derivation index checkout assigned (deposit.address_assigned) and whether the
      -- address may hold money (a transfer to it was observed and it was not seen empty since).
      create table deposit_addresses (
        address text primary key check (address = lower(address)),
        derivation_index bigint,
        session_id text,
        holding boolean not null default false,
        check_due_at timestamptz,
        last_balance_micro bigint,
        updated_at timestamptz not null default now()
      );
      create index deposit_addresses_holding on deposit_addresses (address) where holding;
      create index deposit_addresses_due on deposit_addresses (check_due_at) where check_due_at is not null;
      -- Each EIP-3009 authorization settlement signed to move an address's balance into escrow, recorded before it
      -- is submitted, at most one open per address.
      create table deposit_sweeps (
        sweep_id text primary key,
        address text not null references deposit_addresses (address),
        amount_micro bigint not null check (amount_micro > 0),
        auth_nonce text not null unique,
        valid_after bigint not null,
        valid_before bigint not null,
        signature text not null,
        status text not null check (status in ('open', 'confirmed', 'failed')),
        tx_hash text,
        last_error text,
        created_at timestamptz not null default now(),
        finished_at timestamptz
      );
      create unique index deposit_sweeps_one_open on deposit_sweeps (address) where status = 'open';

      -- Payers the relayer no longer submits for, by address (payer) and by contract code (code_hash, the keccak256
      -- of the payer's code, so the same bytecode at a new address is refused too), after a transaction it relayed
      -- for them reverted on chain; until refused_until.
      create table relayer_refused_payers (
        chain_id integer not null,
        kind text not null check (kind in ('payer', 'code_hash')),
        subject text not null check (subject ~ '^0x[0-9a-f]{40}([0-9a-f]{24})?$'),
        payer text not null,
        tx_hash text not null,
        reason text not null,
        refused_at timestamptz not null default now(),
        refused_until timestamptz not null,
        primary key (chain_id, kind, subject)
      );
      -- The distinct contract payers of one code hash whose relayed transaction reverted for their own check: the
      -- code hash is refused only once enough distinct payers share it, so one wallet that reverts does not lock out
      -- every wallet with the same bytecode (a Safe proxy's code is the same for every Safe).
      create table relayer_code_hash_reverts (
        chain_id integer not null,
        code_hash text not null check (code_hash ~ '^0x[0-9a-f]{64}$'),
        payer text not null check (payer ~ '^0x[0-9a-f]{40}$'),
        tx_hash text not null,
        reverted_at timestamptz not null,
        primary key (chain_id, code_hash, payer)
      )`.execute(db);
  },
};
