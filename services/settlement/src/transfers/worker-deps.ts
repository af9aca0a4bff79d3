import type { ServiceContext } from '@paygate/runtime';
import type { Transaction } from 'kysely';
import type { SettlementConfig } from '../config';
import type { SettlementDB, TransferKind } from '../db';
import type { SettlementMetrics } from '../metrics';
import type { EscrowChain } from './chain';
import type { TransferRow } from './repository';

/** What the owner of a transfer (settlement or refund) does, in the same transaction, when it ends. */
export interface TransferOutcomeHandler {
  onConfirmed(trx: Transaction<SettlementDB>, transfer: TransferRow): Promise<void>;
  onFailed(trx: Transaction<SettlementDB>, transfer: TransferRow, reason: string): Promise<void>;
}

/** What the transfer worker's parts (signing, broadcast, confirmation watch) share. */
export interface TransferWorkerDeps {
  ctx: ServiceContext<SettlementDB>;
  config: SettlementConfig;
  chain: EscrowChain;
  metrics: SettlementMetrics;
  handlers: Record<TransferKind, TransferOutcomeHandler>;
  /** True once the worker's loop is stopping: a pass returns between two transfers. */
  isStopped(): boolean;
}

/** Recorded transfers looked at in one pass, at most. */
export const OPEN_BATCH = 100;

export function describe(error: unknown): string {
  const e = error as { shortMessage?: string; message?: string };
  return String(e?.shortMessage ?? e?.message ?? error).slice(0, 500);
}
