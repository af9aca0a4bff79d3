import { enqueueEvent } from '@paygate/bus';
import { createEvent, type EventData, type Subject } from '@paygate/contracts';
import { formatUsdcExact } from '@paygate/money';
import { currentTraceCarrier } from '@paygate/telemetry';
import { getAddress } from 'ethers';
import type { CheckoutConfig } from '../config';
import type { CheckoutTrx, SessionRow } from '../db';

export type SessionSnapshot = EventData<'checkout.session_created'>;
/** Every checkout.session_* subject: each carries the session's snapshot. */
type SessionEventType = Extract<Subject, `checkout.session_${string}`>;

/** The public session object: exactly CheckoutSessionSnapshot (POST/GET responses, events, WebSocket). */
export function toSnapshot(row: SessionRow, config: CheckoutConfig): SessionSnapshot {
  return {
    sessionId: row.session_id,
    sellerId: row.seller_id,
    skillId: row.skill_id,
    description: row.description,
    status: row.status,
    exactAmount: formatUsdcExact(row.exact_amount_micro),
    paidAmount: row.paid_amount_micro === null ? null : formatUsdcExact(row.paid_amount_micro),
    // The session's own deposit address, or the checkout wallet every amount-matched session shares.
    walletAddress: row.deposit_address ? getAddress(row.deposit_address) : config.checkoutEscrowAddress,
    matching: row.deposit_address ? 'deposit_address' : 'amount',
    network: config.network,
    chainId: config.chainId,
    tokenAddress: config.usdcAddress,
    expiresAt: row.expires_at.toISOString(),
    lateUntil: row.late_until.toISOString(),
    txHash: row.tx_hash,
    payer: row.payer,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** The validated envelope of a session event (with the current trace context). */
export function sessionEvent(type: SessionEventType, row: SessionRow, config: CheckoutConfig) {
  return createEvent(type, 'checkout', toSnapshot(row, config), { trace: currentTraceCarrier() });
}

/** Every status change goes out through the outbox in the transaction that made it. */
export async function enqueueSessionEvent(
  trx: CheckoutTrx,
  type: SessionEventType,
  row: SessionRow,
  config: CheckoutConfig,
): Promise<void> {
  await enqueueEvent(trx, sessionEvent(type, row, config));
}
