import { type Bus, requestRpc } from '@paygate/bus';
import type { RpcReply, RpcRequest } from '@paygate/contracts';
import { parseUsdc } from '@paygate/money';

/** The ledger's available balance may be negative (refunds after settlement): "-3.8". */
export function parseSignedUsdc(text: string): bigint {
  return text.startsWith('-') ? -parseUsdc(text.slice(1)) : parseUsdc(text);
}

/**
 * Settlement's side of escrow-ledger's RPCs (declared in @paygate/contracts): the payout reservations (idempotent
 * per settlementId / payoutId) and the authorisation of every transfer out of escrow; no answer in time throws RpcUnavailableError.
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

  /** Before anything leaves escrow: did the ledger book exactly this transfer, and not see it sent yet? */
  authorizeTransfer(
    request: RpcRequest<'ledger.authorize_transfer'>,
  ): Promise<RpcReply<'ledger.authorize_transfer'>> {
    return requestRpc(this.bus, 'ledger.authorize_transfer', request, { timeoutMs: this.timeoutMs });
  }

  reservePlatformPayout(
    request: RpcRequest<'ledger.reserve_platform_payout'>,
  ): Promise<RpcReply<'ledger.reserve_platform_payout'>> {
    return requestRpc(this.bus, 'ledger.reserve_platform_payout', request, { timeoutMs: this.timeoutMs });
  }

  cancelPlatformPayout(
    request: RpcRequest<'ledger.cancel_platform_payout'>,
  ): Promise<RpcReply<'ledger.cancel_platform_payout'>> {
    return requestRpc(this.bus, 'ledger.cancel_platform_payout', request, { timeoutMs: this.timeoutMs });
  }
}
