import type { BusTables } from '@paygate/bus';
import type { CheckoutMatchingMode, EventData } from '@paygate/contracts';
import type { Kysely, Transaction } from 'kysely';

export type SessionStatus = 'open' | 'paid' | 'paid_late' | 'underpaid' | 'overpaid' | 'expired' | 'refunded';
export const TRANSFER_STATUSES = [
  'matched',
  'unmatched',
  'attached',
  'refund_requested',
  'reorged',
  'claimed',
] as const;
export type TransferStatus = (typeof TRANSFER_STATUSES)[number];

export interface SellersTable {
  seller_id: string;
  revision: number;
  publishable_key: string;
  wallet_address: string;
  /** How the seller's sessions are matched (seller.updated checkoutMatching). */
  checkout_matching: CheckoutMatchingMode;
  updated_at: Date;
}

/** An endpoint as skill.updated carries it, less its health (no concern of checkout's). */
export type SkillEndpointRow = Omit<EventData<'skill.updated'>['endpoints'][number], 'isHealthy'>;

export interface SkillsTable {
  skill_id: string;
  seller_id: string;
  revision: number;
  name: string;
  display_name: string;
  status: string;
  hold_period_hours: number;
  endpoints: SkillEndpointRow[];
  updated_at: Date;
}

export interface SessionsTable {
  session_id: string;
  seller_id: string;
  skill_id: string | null;
  skill_name: string | null;
  endpoint_id: string | null;
  description: string;
  price_micro: bigint;
  exact_amount_micro: bigint;
  status: SessionStatus;
  hold_period_hours: number;
  created_at: Date;
  expires_at: Date;
  late_until: Date;
  /** True while a transfer of exact_amount_micro to the checkout wallet could match this session (until late_until). */
  amount_reserved: boolean;
  paid_amount_micro: bigint | null;
  transfer_id: string | null;
  tx_hash: string | null;
  payer: string | null;
  paid_at: Date | null;
  updated_at: Date;
  /** The session's own deposit address (HD child `derivation_index` of the deposit xpub); null: paid by its unique amount at the checkout wallet. */
  deposit_address: string | null;
  derivation_index: bigint | null;
}

/** The payment columns of a session no transfer pays (a new one, or one reopened when its transfer was reorged). */
export const UNPAID_SESSION = {
  paid_amount_micro: null,
  transfer_id: null,
  tx_hash: null,
  payer: null,
  paid_at: null,
} as const satisfies Partial<SessionsTable>;

export interface IdempotencyKeysTable {
  seller_id: string;
  idempotency_key: string;
  request_hash: string;
  session_id: string;
  created_at: Date;
}

export interface TransfersTable {
  transfer_id: string;
  chain_id: number;
  network: string;
  tx_hash: string;
  log_index: number;
  block_number: bigint;
  block_hash: string;
  from_address: string;
  to_address: string;
  token_address: string;
  amount_micro: bigint;
  status: TransferStatus;
  unmatched_reason: string | null;
  candidate_session_id: string | null;
  session_id: string | null;
  resolution_note: string | null;
  resolved_at: Date | null;
  observed_at: Date;
  updated_at: Date;
  /** Set when an operator marks the transfer for refund (`transfer.refund_requested`). */
  refund_request_id: string | null;
}

interface PaymentsTable {
  payment_id: string;
  session_id: string;
  transfer_id: string;
  amount_micro: bigint;
  status: 'confirmed' | 'reversed';
  confirmed_at: Date;
  reversed_at: Date | null;
}

/** The service's tables, with the bus's own (outbox, inbox) that every schema has. */
export interface CheckoutDatabase extends BusTables {
  sellers: SellersTable;
  skills: SkillsTable;
  sessions: SessionsTable;
  idempotency_keys: IdempotencyKeysTable;
  transfers: TransfersTable;
  payments: PaymentsTable;
}

export type CheckoutDb = Kysely<CheckoutDatabase>;
export type CheckoutTrx = Transaction<CheckoutDatabase>;
export type SessionRow = SessionsTable;
export type TransferRow = TransfersTable;
