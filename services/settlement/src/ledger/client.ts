import { type Bus, type RpcClient, rpcClient } from '@paygate/bus';
import { parseUsdc } from '@paygate/money';

/** The ledger's available balance may be negative (refunds after settlement): "-3.8". */
export function parseSignedUsdc(text: string): bigint {
  return text.startsWith('-') ? -parseUsdc(text.slice(1)) : parseUsdc(text);
}

/**
 * Settlement's side of escrow-ledger's RPCs (declared in @paygate/contracts): the payout reservations (idempotent
 * per settlementId / payoutId) and the authorisation of every transfer out of escrow (`authorizeTransfer`: did the
 * ledger book exactly this transfer and not see it sent yet?); no answer in time throws RpcUnavailableError.
 */
export type LedgerClient = Pick<
  RpcClient<'ledger'>,
  'reservePayout' | 'cancelPayout' | 'authorizeTransfer' | 'reservePlatformPayout' | 'cancelPlatformPayout'
>;

export function ledgerClient(bus: Bus, timeoutMs: number): LedgerClient {
  return rpcClient(bus, 'ledger', { timeoutMs });
}
