import type { NetworkName } from '@paygate/chain';
import type { PaymentKind } from '@paygate/protocol';
import type { PaygateRequest } from './verify-request';

/** Payment data the middleware puts on req.x402 after a successful verification (README, "Verification flow"). */
export interface X402Payment {
  txHash: string;
  /** Decimal USDC. */
  amount: string;
  /** subscription, product, service (absent for payPerCall) */
  type?: Exclude<PaymentKind, 'payPerCall'>;
  /** subscription */
  durationDays?: number;
  /** product */
  requiresShipping?: boolean;
  payer: string;
  network: string;
  /** Subscription: when access ends. */
  expiresAt?: string;
  /** TICKET mode: the ticket's unique id. */
  ticketId?: string;
}

declare global {
  namespace Express {
    interface Request {
      x402?: X402Payment;
      paygate?: PaygateRequest;
      /** The body bytes as received (set by verifyPaygateRequest, or by you in express.json's verify). */
      rawBody?: Buffer;
    }
  }
}

export interface GatewayConfig {
  /** API key from the dashboard (sk_…). Server-side only. */
  apiKey: string;
  /** Paygate's address; default PAYGATE_BASE_URL, and only with NODE_ENV=development http://localhost:8080. */
  apiBaseUrl?: string;
  /** With `escrowAddress`, 402s never wait for Paygate; without, GET /api/verify is fetched and cached. */
  network?: NetworkName;
  /** Paygate's escrow wallet (GET /api/verify's payTo); with `network`. */
  escrowAddress?: string;
  /** The USDC contract, when it is not the network's own (required with network `local`). */
  usdcAddress?: string;
  /**
   * The x402 standard beside Paygate's proof (default on), for pay-per-call prices of at least `minAmount`
   * (default 0.01, Paygate's relaying minimum): settled by Paygate's facilitator into escrow, credited to you.
   */
  x402?:
    | boolean
    | {
        minAmount?: string;
        /** How long a buyer's signed authorization may stay valid. Default 300 s (at most 3600). */
        maxTimeoutSeconds?: number;
        /** Longest wait for Paygate to settle (the transfer's inclusion). Default 30 000 ms. */
        settleTimeoutMs?: number;
        /** USDC's EIP-712 domain, on a chain without a Paygate preset. */
        eip712?: { name: string; version: string };
      };
  /** Longest wait for Paygate before answering HTTP 500. Default 5000 ms. */
  timeoutMs?: number;
  /** This server's public origin, so the resource an agent signs is the full URL (else "<METHOD> <path>"). */
  publicUrl?: string;
  fetch?: typeof fetch;
}

export interface SubscriptionConfig {
  price: string;
  durationDays: number;
  accessUrl?: string;
}

export interface ProductConfig {
  price: string;
  requiresShipping?: boolean;
}

export interface ServiceConfig {
  price: string;
}

export interface TicketOptions {
  /** The skill name the tickets are issued for (their audience). */
  skill: string;
  /** Prefix of this server's routes before the skill's endpoint paths. */
  basePath?: string;
  /** Seconds of clock skew tolerated on exp/iat. Default 5. */
  clockToleranceSeconds?: number;
  /** Where single-use ticket ids are remembered; in process memory by default (one replica). */
  replayStore?: TicketReplayStore;
}

/** Remembers used single-use ids until they expire. Share one across replicas (Redis, SQL…) if needed. */
export interface TicketReplayStore {
  /** false when `ticketId` was already recorded. */
  markUsed(ticketId: string, expiresAtMs: number): boolean | Promise<boolean>;
}
