import { type BackgroundTask, PolledTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import type { Transaction } from 'kysely';
import type { SettlementConfig } from '../config';
import { advisoryLockKey, type SettlementDB, type TransferKind } from '../db';
import type { SettlementMetrics } from '../metrics';
import type { EscrowChain } from './chain';
import { ConfirmationWatch } from './confirmation-watch';
import type { TransferRow } from './repository';
import { TransferSigner } from './signing';

/** What the owner of a transfer does, in the same transaction, when it ends. */
export interface TransferOutcomeHandler {
  onConfirmed(trx: Transaction<SettlementDB>, transfer: TransferRow): Promise<void>;
  onFailed(trx: Transaction<SettlementDB>, transfer: TransferRow, reason: string): Promise<void>;
}

export interface TransferWorkerDeps {
  ctx: ServiceContext<SettlementDB>;
  config: SettlementConfig;
  chain: EscrowChain;
  metrics: SettlementMetrics;
  handlers: Record<TransferKind, TransferOutcomeHandler>;
  isStopped(): boolean;
}

/** Sends every transfer once: committed signed before any broadcast; each pass starts with recovery. */
export class TransferWorker extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;
  private readonly watch: ConfirmationWatch;
  private readonly signer: TransferSigner;

  constructor(parts: Omit<TransferWorkerDeps, 'isStopped'>) {
    super();
    const { ctx, config, chain } = parts;
    const lockKey = advisoryLockKey(
      `settlement-sender:${config.dbSchema}:${config.chainId}:${chain.address.toLowerCase()}`,
    );
    const deps = { ...parts, isStopped: () => this.loop.isStopped };
    this.watch = new ConfirmationWatch(deps);
    this.signer = new TransferSigner(deps, lockKey, this.watch);
    this.loop = new PollingLoop(() => this.runOnce(), {
      what: 'transfer pass',
      logger: ctx.logger,
      intervalMs: config.transferPollIntervalMs,
    });
  }

  async runOnce(): Promise<void> {
    await this.watch.reopenDroppedFinal();
    await this.watch.watchConfirmed();
    await this.watch.advanceOpen();
    await this.signer.signCreated();
  }
}
