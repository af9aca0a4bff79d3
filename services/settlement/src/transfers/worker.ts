import { createHash } from 'node:crypto';
import { type BackgroundTask, PolledTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import type { SettlementConfig } from '../config';
import type { SettlementDB, TransferKind } from '../db';
import type { SettlementMetrics } from '../metrics';
import { TransferBroadcaster } from './broadcast';
import type { EscrowChain } from './chain';
import { ConfirmationWatch } from './confirmation-watch';
import { TransferSigner } from './signing';
import type { TransferOutcomeHandler } from './worker-deps';

export type { TransferOutcomeHandler } from './worker-deps';

/**
 * Sends every outgoing transfer exactly once:
 *  1. `created`  -> under a Postgres advisory lock (one signer for the escrow key across replicas): pre-flight,
 *     allocate the nonce (max of our highest recorded nonce + 1 and the chain's pending nonce), sign, and COMMIT
 *     the signed bytes, hash and nonce (`signed`) before anything is broadcast (./signing).
 *  2. `signed`/`broadcast` without a receipt -> broadcast the SAME recorded bytes (never re-signed); again after
 *     TX_TIMEOUT_MS without a receipt (./broadcast, ./confirmation-watch).
 *  3. a receipt with enough confirmations -> `confirmed` (or `failed` if it reverted), and the owner's outcome
 *     (event via the outbox) in the same transaction, guarded by the state change so it happens once.
 *  4. `confirmed` -> watched to 2 x CONFIRMATIONS, then final; a final one whose nonce a deeper reorg freed is
 *     watched again, so its same bytes are sent again (./confirmation-watch).
 * Every pass starts with step 2/3 for what is already recorded, which is also the crash recovery.
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
    // One signer per escrow key within this deployment (its schema holds the nonces it allocates).
    const digest = createHash('sha256')
      .update(`settlement-sender:${config.dbSchema}:${config.chainId}:${chain.address.toLowerCase()}`)
      .digest();
    const lockKey = BigInt.asIntN(64, BigInt(`0x${digest.subarray(0, 8).toString('hex')}`)).toString();
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

  /** One bounded pass: advance what is recorded (recovery first), then sign and send what is new. */
  async runOnce(): Promise<void> {
    await this.watch.reopenDroppedFinal();
    await this.watch.watchConfirmed();
    await this.watch.advanceOpen();
    await this.signer.signCreated();
  }
}
