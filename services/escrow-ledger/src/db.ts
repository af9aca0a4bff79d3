import type { BusTables } from '@paygate/bus';
import type { Generated, Kysely, Selectable, Transaction } from 'kysely';

export type AccountKind =
  | 'escrow_asset'
  | 'suspense'
  | 'seller_held'
  | 'platform_held'
  | 'seller_available'
  | 'seller_payout_pending'
  | 'platform_revenue'
  | 'platform_payout_pending'
  | 'refund_pending'
  | 'refund_receivable';
/** Why a transfer or payment is set aside for the operator (payments/conflicts.ts records them). */
export const CONFLICT_KINDS = [
  'transfer_already_claimed',
  'amount_exceeds_transfer',
  'transfer_reorged',
  'reorg_after_refund',
  'transfer_refunded',
  'refund_refused',
] as const;
export type ConflictKind = (typeof CONFLICT_KINDS)[number];
export type EscrowStatus = 'held' | 'available' | 'payout_pending' | 'settled' | 'reversed';

/** The ledger schema's tables (migrations) and views (sql/ledger.sql) that builder queries and row types read. */
export interface LedgerDatabase extends BusTables {
  accounts: {
    id: Generated<bigint>;
    kind: AccountKind;
    owner: Generated<string>;
    normal_side: 'debit' | 'credit';
    floor_micro: bigint | null;
    balance_micro: Generated<bigint>;
    created_at: Generated<Date>;
  };
  /** Append-only (triggers refuse UPDATE, DELETE, TRUNCATE). */
  journal_entries: {
    id: Generated<bigint>;
    idempotency_key: string;
    entry_type: string;
    transaction_id: string | null;
    reverses_entry_id: bigint | null;
    memo: unknown | null;
    created_at: Generated<Date>;
  };
  account_balance_drift: {
    id: bigint;
    kind: AccountKind;
    owner: string;
    balance_micro: bigint;
    postings_balance_micro: string;
  };
  transfers: {
    chain_id: number;
    tx_hash: string;
    log_index: number;
    amount_micro: bigint;
    from_address: string;
    to_address: string | null;
    block_number: bigint | null;
    status: 'observed' | 'reorged';
    booked_by: 'transfer.observed' | 'payment.confirmed';
    claimed_by_transaction_id: string | null;
    observed_at: Date;
    reorged_at: Date | null;
    /** 0 for the first inclusion; +1 each time the transfer is mined again after a reorg removed it. */
    inclusion: Generated<number>;
    block_hash: string | null;
    refund_id: string | null;
    /** The indexer observed it (after CONFIRMATIONS) or its receipt was that deep; null while awaiting the chain. */
    chain_confirmed_at: Date | null;
    /** The head block when the receipt check first missed it (cleared when it is seen again). */
    missing_since_block: bigint | null;
    /** The chain confirmation check's order: the lowest turns are read next; a check takes a new one. */
    chain_check_turn: Generated<bigint | null>;
  };
  transactions: {
    id: string;
    payment_id: string;
    source: string;
    seller_id: string;
    skill_id: string | null;
    skill_name: string | null;
    endpoint_id: string | null;
    session_id: string | null;
    payer: string;
    chain_id: number;
    network: string;
    tx_hash: string;
    log_index: number;
    amount_micro: bigint;
    seller_share_micro: bigint;
    platform_share_micro: bigint;
    refunded_micro: Generated<bigint>;
    refunded_seller_micro: Generated<bigint>;
    refunded_platform_micro: Generated<bigint>;
    hold_period_hours: number;
    hold_until: Date;
    escrow_status: EscrowStatus;
    settlement_id: string | null;
    confirmed_at: Date;
    released_at: Date | null;
    settled_at: Date | null;
    reversed_at: Date | null;
    /** Why it was reversed: the indexer reported a reorg, or the receipt check found the transfer gone. */
    reversal_reason: 'transfer_reorged' | 'not_on_chain' | null;
    created_at: Generated<Date>;
  };
  payment_conflicts: {
    id: Generated<bigint>;
    kind: ConflictKind;
    chain_id: number;
    tx_hash: string;
    log_index: number;
    payment_id: string | null;
    source: string | null;
    seller_id: string | null;
    amount_micro: bigint | null;
    existing_transaction_id: string | null;
    detail: unknown;
    status: Generated<'open' | 'resolved'>;
    created_at: Generated<Date>;
    resolution: unknown | null;
  };
  refunds: {
    id: string;
    /** A seller's refund of a payment, an unmatched transfer sent back, or a payer's unserved refunds sent as one. */
    kind: Generated<'payment' | 'unmatched_transfer' | 'unserved_batch'>;
    transaction_id: string | null;
    seller_id: string | null;
    payer: string;
    chain_id: number;
    tx_hash: string | null;
    log_index: number | null;
    amount_micro: bigint;
    seller_part_micro: bigint;
    platform_part_micro: bigint;
    phase: 'in_escrow' | 'after_release' | 'in_suspense' | 'batch';
    reason: string;
    status: 'pending' | 'completed' | 'failed';
    refund_request_id: string | null;
    transfer_refund_request_id: string | null;
    refund_tx_hash: string | null;
    created_at: Date;
    completed_at: Date | null;
  };
  refund_requests: {
    id: string;
    transaction_id: string;
    seller_id: string;
    payer: string;
    reason: string;
    /** The payer's signature over the request message, lowercase. */
    signature: string;
    status: 'pending' | 'approved' | 'rejected' | 'completed';
    refund_id: string | null;
    decision_reason: string | null;
    created_at: Date;
    decided_at: Date | null;
    completed_at: Date | null;
  };
  /** What a payer owes back: a refunded unmatched transfer a reorg dropped (per inclusion; refunds/receivables.ts). */
  refund_receivables: {
    chain_id: number;
    tx_hash: string;
    log_index: number;
    inclusion: number;
    refund_id: string;
    payer: string;
    amount_micro: bigint;
    status: 'open' | 'settled';
    created_at: Date;
    settled_at: Date | null;
    settled_by_log_index: number | null;
    settled_by_inclusion: number | null;
  };
  payout_reservations: {
    settlement_id: string;
    seller_id: string;
    ok: boolean;
    amount_micro: bigint;
    available_micro: bigint;
    reason: string | null;
    status: 'reserved' | 'completed' | 'cancelled' | 'refused';
    tx_hash: string | null;
    payout_address: string | null;
    created_at: Date;
    completed_at: Date | null;
  };
  /** The ledger's own view of each seller's payout address (`seller.updated`): payouts are reserved to it. */
  seller_payout_addresses: {
    seller_id: string;
    revision: number;
    payout_address: string;
    updated_at: Generated<Date>;
  };
  idempotency_keys: {
    seller_id: string;
    key: string;
    route: string;
    request_hash: string;
    response_status: number;
    response_body: unknown;
    created_at: Generated<Date>;
  };
  /** How far below zero an operator lets a seller's balance (held + available) go; no row = 0. */
  seller_credit_limits: {
    seller_id: string;
    credit_limit_micro: bigint;
    updated_at: Date;
  };
  /** The platform's revenue reserved for a payout to the treasury (settlement sends it once). */
  platform_payouts: {
    payout_id: string;
    treasury_address: string;
    amount_micro: bigint;
    status: 'reserved' | 'completed' | 'cancelled';
    tx_hash: string | null;
    created_at: Date;
    completed_at: Date | null;
  };
  /** One attempt of a paid call the gateway reported: a seller failure or a retry served after one (by payment id). */
  payment_call_attempts: {
    payment_id: string;
    attempt: number;
    seller_id: string;
    outcome: 'failed' | 'served';
    upstream_outcome: 'error_status' | 'timeout' | 'unreachable' | 'misconfigured' | null;
    upstream_status: number | null;
    at: Date;
    retry_until: Date | null;
    event_id: string;
    recorded_at: Generated<Date>;
  };
  /** A paid call whose window closed unserved (payment.call_unserved), by payment id, and what was decided. */
  unserved_calls: {
    payment_id: string;
    seller_id: string;
    attempts: number;
    retry_until: Date;
    closed_at: Date;
    status: 'closed' | 'refunded' | 'served' | 'not_refundable';
    decision: string | null;
    transaction_id: string | null;
    refund_id: string | null;
    payer: string | null;
    amount_micro: bigint | null;
    /** The unserved_batch refund that sends it, once its payer's batch went out. */
    batch_id: string | null;
    event_id: string;
    recorded_at: Generated<Date>;
    checked_at: Generated<Date>;
    decided_at: Date | null;
  };
}

/** Whole rows, as `select *` reads them. */
export type TransactionRow = Selectable<LedgerDatabase['transactions']>;
export type TransferRow = Selectable<LedgerDatabase['transfers']>;

export type LedgerDb = Kysely<LedgerDatabase>;
export type LedgerTrx = Transaction<LedgerDatabase>;

/** `R` with the columns `K` non-null: those a table's check guarantees in the rows a statement selects. */
export type Checked<R, K extends keyof R> = Omit<R, K> & { [P in K]: NonNullable<R[P]> };

/** The columns `K` of a row of `T` as a query reads them: what every raw statement's row type is made of. */
export type Row<T extends keyof LedgerDatabase, K extends keyof Selectable<LedgerDatabase[T]>> = Pick<
  Selectable<LedgerDatabase[T]>,
  K
>;
