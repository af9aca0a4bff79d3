import type { RelayerSubmitReply } from '@paygate/contracts';
import type { Selectable } from 'kysely';
import type { FeeCaps } from './chain';
import type { RelayedAuthorizationsTable } from './tables';

export type Row = Selectable<RelayedAuthorizationsTable>;
export type Refusal = Extract<RelayerSubmitReply, { ok: false }>;

export interface RelayerSettings {
  chainId: number;
  usdcAddress: string;
  escrowAddress: string;
  /** Below this native balance the relayer refuses new work (x402 is then not offered). */
  minBalanceWei: bigint;
  /** A broadcast without a receipt after this long is re-signed with higher fees (same relayer nonce). */
  feeBumpAfterMs: number;
  maxFeeBumps: number;
  /** Never pay more than this per gas, whatever the bumps. */
  maxFeePerGasCapWei: bigint;
  /** How often the chain's head is polled while a caller waits for inclusion (denser when a block is due). */
  receiptPollMs: number;
  /** RELAYER_WS_URL: the node's WebSocket, whose pushed heads wake waiting callers at once (polling stays on). */
  headsWsUrl?: string;
  /** How often the background pass rebroadcasts, bumps and finishes what is recorded. */
  pollIntervalMs: number;
  /** Blocks searched for someone else's use of an authorization. */
  lookbackBlocks: number;
  /**
   * CONFIRMATIONS: a confirmed submission is answered on its first receipt (x402 books it then), so its receipt is
   * watched until it is this deep; a reorg that drops it before then has it broadcast again (same bytes).
   */
  confirmations: number;
  dbSchema: string;
  /** RELAYER_REVERT_REFUSAL_HOURS: how long a payer (and its code) is refused after its relayed transaction reverted. */
  revertRefusalMs: number;
  /** RELAYER_STUCK_AFTER_MS: a key with a transaction waiting this long for a receipt gets no new submissions. */
  stuckAfterMs: number;
  /** RELAYER_CODE_HASH_REFUSAL_PAYERS: distinct reverting payers of one code hash before that code is refused. */
  codeHashRefusalPayers: number;
  /** The injected clock (refusals' times). */
  now: () => Date;
}

/** Recorded rows looked at in one background pass, at most. */
export const OPEN_BATCH = 100;

export function describe(error: unknown): string {
  const e = error as { shortMessage?: string; message?: string };
  return String(e?.shortMessage ?? e?.message ?? error).slice(0, 300);
}

export const refusal = (reason: Refusal['reason'], message: string): Refusal => ({
  ok: false,
  reason,
  message,
});
const smaller = (a: bigint, b: bigint) => (a < b ? a : b);
export const larger = (a: bigint, b: bigint) => (a > b ? a : b);

/** The fees to sign with: never above RELAYER_MAX_FEE_GWEI, the priority fee never above the fee. */
export function cappedFees(fees: FeeCaps, capWei: bigint): FeeCaps {
  const maxFeePerGas = smaller(fees.maxFeePerGas, capWei);
  const maxPriorityFeePerGas = smaller(fees.maxPriorityFeePerGas, maxFeePerGas);
  return { maxFeePerGas, maxPriorityFeePerGas };
}

/** A row's status once nothing more is sent for it. */
export function isFinished(row: Row): boolean {
  return row.status === 'confirmed' || row.status === 'used_elsewhere' || row.status === 'failed';
}
