import { type Bus, requestRpc } from '@paygate/bus';
import type { RpcReply, RpcRequest } from '@paygate/contracts';
import { parseUsdc } from '@paygate/money';

/** The ledger's available balance may be negative (refunds after settlement): "-3.8". */
export function parseSignedUsdc(text: string): bigint {
  return text.startsWith('-') ? -parseUsdc(text.slice(1)) : parseUsdc(text);
}

/**
 * Settlement's side of escrow-ledger's payout RPCs (`ledger.reserve_payout`, `ledger.cancel_payout`, declared
 * in @paygate/contracts). Both are idempotent per settlementId; no answer in time throws RpcUnavailableError.
 */
export class LedgerClient {
  constructor(
    private readonly bus: Bus,
    private readonly timeoutMs: number,
  ) {}

  reservePayout(request: RpcRequest<'ledger.reserve_payout'>): Promise<RpcReply<'ledger.reserve_payout'>> {
    return requestRpc(this.bus, 'ledger.reserve_payout', request, { timeoutMs: this.timeoutMs });
  }

  cancelPayout(request: RpcRequest<'ledger.cancel_payout'>): Promise<RpcReply<'ledger.cancel_payout'>> {
    return requestRpc(this.bus, 'ledger.cancel_payout', request, { timeoutMs: this.timeoutMs });
  }
}
