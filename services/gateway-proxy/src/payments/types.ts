import type { PaymentKind } from '@paygate/protocol';
import type { Selectable } from 'kysely';
import type { GatewayProxyConfig } from '../config';
import type { PaymentClaimsTable } from '../db';
import type { PaymentFailure } from './failures';

/** A gateway payment: one row per `network:txHash` in payment_claims. */
export type PaymentClaim = Selectable<PaymentClaimsTable>;

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

/** A sale of a seller's own resource (its middleware's /api/verify, its facilitator calls), not of a catalog skill. */
export const sellerSale = (sale: Omit<Purchase, 'skillId' | 'skillName' | 'endpointId'>): Purchase => ({
  ...sale,
  skillId: null,
  skillName: null,
  endpointId: null,
});

export type PresentOutcome =
  | { ok: true; claim: PaymentClaim; fresh: boolean; chainMs: number }
  | { ok: false; failure: PaymentFailure; chainMs: number };

/** What `verify` made of a tx-hash proof: decided already (refused, or a claim served again), or a transfer to claim. */
export type Verified =
  | { kind: 'decided'; outcome: PresentOutcome }
  | { kind: 'transfer'; transfer: { logIndex: number; amountMicro: bigint }; chainMs: number };

export type PaymentSettings = Pick<
  GatewayProxyConfig,
  'network' | 'chainId' | 'usdcAddress' | 'escrowAddress' | 'retryWindowSeconds' | 'upstreamTimeoutMs' | 'now'
>;
