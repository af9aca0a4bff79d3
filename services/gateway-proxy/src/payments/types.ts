import type { PaymentKind } from '@paygate/protocol';
import type { PaymentFailure } from './failures';

/** A gateway payment: one row per `network:txHash` in payment_claims. */
export interface PaymentClaim {
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
  /** The payment path the transfer was claimed through. */
  claimed_via: 'proxy' | 'ticket' | 'verify' | 'facilitator';
  /** unserved: its retry window passed after a seller failure; final (payments/unserved.ts). */
  state: 'in_flight' | 'served' | 'retryable' | 'unserved';
  access_expires_at: Date | null;
  retry_until: Date | null;
  attempts: number;
  created_at: Date;
  updated_at: Date;
}

/** What is being sold, and to whom the money goes. */
export interface Purchase {
  resource: string;
  priceMicro: bigint;
  kind: PaymentKind;
  durationDays: number | null;
  sellerId: string;
  skillId: string | null;
  skillName: string | null;
  endpointId: string | null;
  holdPeriodHours: number;
  claimedVia: PaymentClaim['claimed_via'];
}

export type PresentOutcome =
  | { ok: true; claim: PaymentClaim; fresh: boolean; chainMs: number }
  | { ok: false; failure: PaymentFailure; chainMs: number };

/** What `verify` made of a tx-hash proof: decided already (refused, or a claim served again), or a transfer to claim. */
export type Verified =
  | { kind: 'decided'; outcome: PresentOutcome }
  | { kind: 'transfer'; transfer: { logIndex: number; amountMicro: bigint }; chainMs: number };

export interface PaymentSettings {
  network: string;
  chainId: number;
  usdcAddress: string;
  escrowAddress: string;
  retryWindowSeconds: number;
  upstreamTimeoutMs: number;
  now: () => Date;
}
