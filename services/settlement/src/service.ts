import type { ConsumerOptions } from '@paygate/bus';
import type { Subject } from '@paygate/contracts';
import { type RunningService, type ServiceContext, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import { migrations } from '../migrations';
import { type Clock, systemClock } from './clock';
import type { SettlementConfig } from './config';
import type { SettlementDB } from './db';
import { LedgerClient } from './ledger/client';
import { createSettlementMetrics } from './metrics';
import { refundInitiatedConsumer, refundOutcome } from './refunds/consumer';
import { SettlementScheduler } from './schedule/scheduler';
import { sellerProjectionConsumer } from './sellers/projection';
import { payoutOutcome } from './settlements/outcome';
import { settlementRoutes } from './settlements/routes';
import { EscrowChain } from './transfers/chain';
import { TransferWorker } from './transfers/worker';

export interface SettlementOptions {
  /** Business clock (settlement periods, completedAt); tests move it instead of sleeping. */
  now?: Clock;
}

export interface RunningSettlement extends RunningService<SettlementDB> {
  scheduler: SettlementScheduler;
  transfers: TransferWorker;
  chain: EscrowChain;
}

export async function startSettlement(
  config: SettlementConfig,
  options: SettlementOptions = {},
): Promise<RunningSettlement> {
  const clock = options.now ?? systemClock;
  const chain = new EscrowChain({
    rpcUrl: config.rpcUrl,
    chainId: config.chainId,
    usdcAddress: config.usdcAddress,
    privateKey: config.escrowPrivateKey,
    timeoutMs: config.rpcTimeoutMs,
  });
  let parts: { scheduler: SettlementScheduler; transfers: TransferWorker; auth: SellerAuth } | undefined;
  // startService calls routes, then consumers, then background with the same ctx: build everything once.
  const build = (ctx: ServiceContext<SettlementDB>) => {
    if (parts) return parts;
    const metrics = createSettlementMetrics(ctx, config.txTimeoutMs);
    const transfers = new TransferWorker(ctx, config, chain, metrics, {
      payout: payoutOutcome(clock),
      refund: refundOutcome(clock),
    });
    const ledger = new LedgerClient(ctx.bus, config.ledgerTimeoutMs);
    const scheduler = new SettlementScheduler(ctx, config, clock, ledger, chain, metrics, () =>
      transfers.kick(),
    );
    parts = { scheduler, transfers, auth: new SellerAuth(ctx.bus) };
    return parts;
  };

  let running: RunningService<SettlementDB>;
  try {
    running = await startService<SettlementDB>({
      name: 'settlement',
      config,
      migrations,
      routes: (app, ctx) => settlementRoutes(app, ctx, build(ctx).auth),
      consumers: (ctx) => {
        const { transfers } = build(ctx);
        // Each consumer is typed by its own subject; the list holds them side by side.
        return [
          sellerProjectionConsumer(clock),
          refundInitiatedConsumer(config, chain, () => transfers.kick()),
        ] as unknown as ConsumerOptions<Subject>[];
      },
      background: (ctx) => {
        const { scheduler, transfers } = build(ctx);
        return [transfers, scheduler];
      },
      readinessChecks: () => [async () => void (await chain.blockNumber())],
      onStop: async () => {
        parts?.auth.close();
      },
    });
  } catch (error) {
    chain.destroy();
    throw error;
  }
  const { scheduler, transfers } = parts!;
  return {
    ...running,
    scheduler,
    transfers,
    chain,
    async stop() {
      await running.stop();
      chain.destroy();
    },
  };
}
