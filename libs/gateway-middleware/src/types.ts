import type { PaymentKind } from '@paygate/agent-client';

/** Payment data the middleware puts on req.x402 after a successful verification (SPEC: "req.x402"). */
export interface X402Payment {
  /** all middleware */
  txHash: string;
  /** all middleware: decimal USDC string */
  amount: string;
  /** subscription, product, service (absent for payPerCall, as SPEC lists) */
  type?: Exclude<PaymentKind, 'payPerCall'>;
  /** subscription */
  durationDays?: number;
  /** product */
  requiresShipping?: boolean;
  /** The paying wallet (Paygate extension). */
  payer: string;
  network: string;
  /** Subscription: when access ends (Paygate extension). */
  expiresAt?: string;
  /** TICKET mode: the ticket's unique id. */
  ticketId?: string;
}

declare global {
  namespace Express {
    interface Request {
      x402?: X402Payment;
    }
  }
}

export interface GatewayConfig {
  /** API key from the dashboard (sk_…). Server-side only. */
  apiKey: string;
  /** Overrides the Paygate API address. Defaults to PAYGATE_BASE_URL or http://localhost:8080 (the dev edge). */
  apiBaseUrl?: string;
  /** Longest wait for Paygate before answering HTTP 500. Default 5000 ms. */
  timeoutMs?: number;
  /**
   * Public origin of this server (https://api.seller.example), so the resource an agent signs names the full URL.
   * Without it the resource is "<METHOD> <path>".
   */
  publicUrl?: string;
  /** fetch implementation (global fetch by default). */
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
  /** Prefix of this server's routes before the skill's endpoint paths (the path part of the skill's apiBaseUrl). */
  basePath?: string;
  /** Seconds of clock skew tolerated on exp/iat. Default 5. */
  clockToleranceSeconds?: number;
  /** Where single-use ticket ids are remembered; in process memory by default (one replica). */
  replayStore?: TicketReplayStore;
}

/** Remembers used single-use ticket ids until they expire. Share one across replicas (Redis, SQL…) if needed. */
export interface TicketReplayStore {
  /** Records `ticketId`; returns false when it was already recorded. */
  markUsed(ticketId: string, expiresAtMs: number): boolean | Promise<boolean>;
}
