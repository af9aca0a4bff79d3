import type { RelayerSubmitReply } from '@paygate/contracts';
import type { Selectable } from 'kysely';
import type { SettlementConfig } from '../config';
import { type RelayedAuthorizationsTable, smaller } from '../db';
import { describe } from '../errors';
import type { FeeCaps } from './chain';
import type { RelayerConfig } from './config';

export type Row = Selectable<RelayedAuthorizationsTable>;
export type Refusal = Extract<RelayerSubmitReply, { ok: false }>;

/**
 * The relayer's configuration (./config, documented there) and what it takes from the service's; `confirmations`:
 * a confirmed submission's receipt is watched until this deep (a reorg has it sent again).
 */
export type RelayerSettings = Omit<RelayerConfig, 'privateKeys' | 'address' | 'addresses'> &
  Pick<
    SettlementConfig,
    'chainId' | 'usdcAddress' | 'confirmations' | 'dbSchema' | 'transferPollIntervalMs'
  > & {
    escrowAddress: string;
    now: () => Date;
  };

export const refusal = (reason: Refusal['reason'], message: string): Refusal => ({
  ok: false,
  reason,
  message,
});
export const chainUnavailable = (error: unknown) =>
  refusal('chain_unavailable', `the chain RPC did not answer: ${describe(error)}`);

/** The fees to sign with: never above RELAYER_MAX_FEE_GWEI, the priority fee never above the fee. */
export function cappedFees(fees: FeeCaps, capWei: bigint): FeeCaps {
  const maxFeePerGas = smaller(fees.maxFeePerGas, capWei);
  const maxPriorityFeePerGas = smaller(fees.maxPriorityFeePerGas, maxFeePerGas);
  return { maxFeePerGas, maxPriorityFeePerGas };
}

/** confirmed, used_elsewhere or failed: nothing more is sent for it. */
export const isFinished = (row: Row) => row.status !== 'signed' && row.status !== 'broadcast';
