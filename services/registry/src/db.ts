import type { BusTables } from '@paygate/bus';
import type { CheckoutMatchingMode } from '@paygate/contracts';
import type { Generated } from 'kysely';

export interface SellersTable {
  id: string;
  wallet_address: string;
  payout_address: string;
  api_key_hash: string;
  api_key_version: Generated<number>;
  publishable_key: string;
  webhook_url: Generated<string | null>;
  webhook_secret_encrypted: Generated<string | null>;
  webhook_secret_version: Generated<number>;
  /** Sealed base64url forwarding key (derived from the current API key); null for keys issued before it existed. */
  forwarding_key_encrypted: string | null;
  /** Dashboard sessions issued at or before this moment are refused (sign-out); null: never signed out. */
  sessions_revoked_at: Generated<Date | null>;
  /** The API key replaced by the last rotation: still accepted until previous_api_key_expires_at (the overlap). */
  previous_api_key_hash: Generated<string | null>;
  previous_api_key_expires_at: Generated<Date | null>;
  /** Sealed forwarding key of that previous API key (the gateway signs with both during the overlap). */
  previous_forwarding_key_encrypted: Generated<string | null>;
  /** What the seller sees of its keys: a name, the last four characters, when made and last used (to the minute). */
  api_key_name: Generated<string>;
  api_key_hint: Generated<string | null>;
  api_key_created_at: Generated<Date>;
  api_key_last_used_at: Generated<Date | null>;
  previous_api_key_name: Generated<string | null>;
  previous_api_key_hint: Generated<string | null>;
  previous_api_key_created_at: Generated<Date | null>;
  previous_api_key_last_used_at: Generated<Date | null>;
  /** A payout address the account wallet signed, applied at pending_payout_effective_at (PAYOUT_ADDRESS_DELAY). */
  pending_payout_address: Generated<string | null>;
  pending_payout_effective_at: Generated<Date | null>;
  settlement_frequency: Generated<(typeof SETTLEMENT_FREQUENCIES)[number]>;
  minimum_settlement_micro: Generated<bigint>;
  /** How the seller's checkout sessions are matched: a unique amount on the checkout wallet, or an address each. */
  checkout_matching: Generated<CheckoutMatchingMode>;
  revision: Generated<number>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export const SETTLEMENT_FREQUENCIES = ['DAILY', 'WEEKLY', 'MONTHLY'] as const;

interface SiweNoncesTable {
  nonce: string;
  expires_at: Date;
}

export const SKILL_STATUSES = [
  'PENDING_VALIDATION',
  'ACTIVE',
  'VALIDATION_FAILED',
  'SUSPENDED',
  'ARCHIVED',
] as const;
export const SKILL_TYPES = ['API', 'SaaS', 'Product', 'Service', 'Subscription', 'Content'] as const;
export const SKILL_MODES = ['PROXY', 'TICKET'] as const;
export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type SkillStatus = (typeof SKILL_STATUSES)[number];
export type SkillType = (typeof SKILL_TYPES)[number];
export type HttpMethod = (typeof HTTP_METHODS)[number];

export interface SkillsTable {
  id: string;
  seller_id: string;
  name: string;
  display_name: string;
  description: string;
  api_base_url: string;
  mode: (typeof SKILL_MODES)[number];
  type: SkillType;
  categories: string[];
  duration_days: number | null;
  requires_shipping: boolean | null;
  hold_period_hours: number;
  status: SkillStatus;
  status_reason: Generated<string | null>;
  revision: Generated<number>;
  validation_seq: Generated<number>;
  validation_lease_until: Generated<Date | null>;
  health_checked_at: Generated<Date | null>;
  skill_md: Generated<string>;
  skill_md_version: Generated<number>;
  skill_md_source: Generated<'generated' | 'manual'>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface EndpointsTable {
  id: string;
  /** Insertion order: endpoints are listed as they were added. */
  position: Generated<bigint>;
  skill_id: string;
  path: string;
  method: HttpMethod;
  description: string;
  price_micro: bigint;
  is_healthy: Generated<boolean>;
  active: Generated<boolean>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

interface IdempotencyKeysTable {
  seller_id: string;
  key: string;
  request_hash: string;
  /** Null while the first request with this key runs (the key is claimed). */
  response_status: Generated<number | null>;
  response_body: Generated<unknown | null>;
  created_at: Generated<Date>;
}

export interface RegistryDatabase extends BusTables {
  sellers: SellersTable;
  siwe_nonces: SiweNoncesTable;
  skills: SkillsTable;
  endpoints: EndpointsTable;
  idempotency_keys: IdempotencyKeysTable;
}
