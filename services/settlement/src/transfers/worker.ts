import { type BackgroundTask, PolledTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import type { SettlementConfig } from '../config';
import { advisoryLockKey, type SettlementDB, type TransferKind } from '../db';
import type { SettlementMetrics } from '../metrics';
import { TransferBroadcaster } from './broadcast';
import type { EscrowChain } from './chain';
import { ConfirmationWatch } from './confirmation-watch';
import { TransferSigner } from './signing';
import type { TransferOutcomeHandler } from './worker-deps';

export type { TransferOutcomeHandler } from './worker-deps';

/**
 * Sends every outgoing transfer exactly once: signed and committed under an advisory lock before any broadcast
 * (./signing), only the recorded bytes sent again, finished with the owner's outcome in one transaction
 * (./confirmation-watch). Each pass starts with what is recorded, which is also the crash recovery.
 */
export class TransferWorker extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;
  private readonly watch: ConfirmationWatch;
  private readonly signer: TransferSigner;

  constructor(
    ctx: ServiceContext<SettlementDB>,
    config: SettlementConfig,
    chain: EscrowChain,
    metrics: SettlementMetrics,
    handlers: Record<TransferKind, TransferOutcomeHandler>,
  ) {
    super();
    const lockKey = advisoryLockKey(
      `settlement-sender:${config.dbSchema}:${config.chainId}:${chain.address.toLowerCase()}`,
    );
    const deps = { ctx, config, chain, metrics, handlers, isStopped: () => this.loop.isStopped };
    const broadcaster = new TransferBroadcaster(deps);
    this.watch = new ConfirmationWatch(deps, broadcaster);
    this.signer = new TransferSigner(deps, lockKey, broadcaster);
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
