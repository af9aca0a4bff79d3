import type { BusTables } from '@paygate/bus';
import type { EventData } from '@paygate/contracts';
import type { RateLimitTables } from '@paygate/http';
import type { PaymentKind } from '@paygate/protocol';
import type { ServiceContext } from '@paygate/runtime';
import type { ColumnType, Generated } from 'kysely';

type Json<T> = ColumnType<T, T | string, T | string>;

/** The `skill.updated` projection: the newest revision of each skill (only ACTIVE ones are sold). */
export interface SkillsTable {
  skill_id: string;
  name: string;
  revision: number;
  snapshot: Json<EventData<'skill.updated'>>;
  updated_at: Generated<Date>;
}

/** One row per `network:txHash`: the purchase a transfer paid, its state and reuse window. */
export interface PaymentClaimsTable {
  id: string;
  network: string;
  chain_id: number;
  tx_hash: string;
  log_index: number;
  payer: string;
  token: string;
  amount_micro: bigint;
  seller_id: string;
  skill_id: string | null;
  skill_name: string | null;
  endpoint_id: string | null;
  resource: string;
  kind: PaymentKind;
  claimed_via: 'proxy' | 'ticket' | 'verify' | 'facilitator';
  /** unserved: its retry window passed with no attempt served; final (payments/unserved.ts). */
  state: 'in_flight' | 'served' | 'retryable' | 'unserved';
  access_expires_at: Date | null;
  retry_until: Date | null;
  /** Why it was left retryable (not_attempted: settled after its caller stopped waiting); kept once it leaves the state. */
  retry_cause: 'seller_failure' | 'buyer_body' | 'not_attempted' | null;
  attempts: Generated<number>;
  created_at: Date;
  updated_at: Date;
}

/** One x402 (EIP-3009) authorization, whoever presents it: `(chain_id, token, payer, auth_nonce)`. */
export interface X402AuthorizationsTable {
  chain_id: number;
  token: string;
  payer: string;
  auth_nonce: string;
  signature: string;
  to_address: string;
  value_micro: bigint;
  valid_after: bigint;
  valid_before: bigint;
  resource: string;
  seller_id: string;
  /** The purchase it pays for, `priceMicro` as a decimal string. */
  purchase: Json<unknown>;
  x402_version: 1 | 2;
  state: 'submitting' | 'settled' | 'refused';
  reason: string | null;
  tx_hash: string | null;
  log_index: number | null;
  claim_id: string | null;
  attempts: Generated<number>;
  created_at: Date;
  updated_at: Date;
}

/** Ticket (and forward) signing keys, sealed under TICKET_KEY_ENCRYPTION_KEY. */
interface TicketKeysTable {
  kid: string;
  private_key_sealed: string;
  public_jwk: Json<unknown>;
  created_at: Generated<Date>;
}

/** x402's payment-identifier: one binding per payer and id, to a request fingerprint and an authorization. */
interface X402PaymentIdsTable {
  payer: string;
  payment_id: string;
  fingerprint: string;
  chain_id: number;
  token: string;
  auth_nonce: string;
  created_at: Date;
  updated_at: Date;
}

/** The payers a seller refuses to sell to (lowercase addresses). */
interface BlockedPayersTable {
  seller_id: string;
  payer: string;
  reason: string | null;
  created_at: Date;
}

/** x402's sign-in-with-x: each signed message's nonce, accepted once until it expires. */
interface SiwxNoncesTable {
  nonce: string;
  address: string;
  domain: string;
  expires_at: Date;
  created_at: Date;
}

/** The `gateway` schema, as its migrations leave it (migrations/), with the libraries' tables in it. */
export interface GatewayDatabase extends BusTables, RateLimitTables {
  skills: SkillsTable;
  payment_claims: PaymentClaimsTable;
  x402_authorizations: X402AuthorizationsTable;
  ticket_keys: TicketKeysTable;
  x402_payment_ids: X402PaymentIdsTable;
  blocked_payers: BlockedPayersTable;
  siwx_nonces: SiwxNoncesTable;
}

export type GatewayContext = ServiceContext<GatewayDatabase>;
