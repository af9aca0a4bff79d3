import { formatUsdcExact } from '@paygate/money';
import type { TransferRow } from '../db';

export function toTransferView(row: TransferRow) {
  return {
    transferId: row.transfer_id,
    status: row.status,
    reason: row.unmatched_reason,
    candidateSessionId: row.candidate_session_id,
    sessionId: row.session_id,
    chainId: row.chain_id,
    network: row.network,
    txHash: row.tx_hash,
    logIndex: row.log_index,
    blockNumber: Number(row.block_number),
    from: row.from_address,
    to: row.to_address,
    token: row.token_address,
    amount: formatUsdcExact(row.amount_micro),
    note: row.resolution_note,
    refundRequestId: row.refund_request_id ?? null,
    observedAt: row.observed_at.toISOString(),
    resolvedAt: row.resolved_at?.toISOString() ?? null,
  };
}
