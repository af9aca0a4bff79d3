import type { Bus } from '@paygate/bus';
import { parseUsdc } from '@paygate/money';

/**
 * Request-reply protocol with escrow-ledger (it owns balances). Both calls are idempotent per settlementId.
 * Subjects: bus.rpcSubject('ledger.reserve_payout') and bus.rpcSubject('ledger.cancel_payout').
 */
export const RESERVE_PAYOUT_RPC = 'ledger.reserve_payout';
export const CANCEL_PAYOUT_RPC = 'ledger.cancel_payout';

export interface ReservePayoutRequest {
  settlementId: string;
  sellerId: string;
  /** Decimal USDC string: reserve nothing unless at least this much is available. */
  minimumAmount: string;
}
export type ReservePayoutReply =
  | { ok: true; amount: string }
  | { ok: false; reason: 'below_minimum' | 'nothing_available'; available: string };

export interface CancelPayoutRequest {
  settlementId: string;
}
export type CancelPayoutReply =
  | { ok: true; status?: 'cancelled' | 'refused' }
  | {
      ok: false;
      reason: 'unknown_settlement' | 'already_completed' | 'invalid_request' | string;
      message?: string;
    };

/** The ledger's available balance may be negative (refunds after settlement): "-3.8". */
export function parseSignedUsdc(text: string): bigint {
  return text.startsWith('-') ? -parseUsdc(text.slice(1)) : parseUsdc(text);
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class LedgerClient {
  constructor(
    private readonly bus: Bus,
    private readonly timeoutMs: number,
  ) {}

  private async request<T>(name: string, body: unknown): Promise<T> {
    const message = await this.bus.nc.request(
      this.bus.rpcSubject(name),
      encoder.encode(JSON.stringify(body)),
      {
        timeout: this.timeoutMs,
      },
    );
    return JSON.parse(decoder.decode(message.data)) as T;
  }

  async reservePayout(request: ReservePayoutRequest): Promise<ReservePayoutReply> {
    const reply = await this.request<ReservePayoutReply>(RESERVE_PAYOUT_RPC, request);
    if (reply?.ok === true && typeof reply.amount === 'string') return reply;
    if (reply?.ok === false && (reply.reason === 'below_minimum' || reply.reason === 'nothing_available')) {
      return reply;
    }
    throw new Error(
      `ledger.reserve_payout answered something unexpected: ${JSON.stringify(reply).slice(0, 200)}`,
    );
  }

  async cancelPayout(request: CancelPayoutRequest): Promise<CancelPayoutReply> {
    return this.request<CancelPayoutReply>(CANCEL_PAYOUT_RPC, request);
  }
}
