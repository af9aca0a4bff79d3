import { defineConsumer } from '@paygate/bus';
import { checkChainRpc, networks } from '@paygate/chain';
import { type ServiceContext, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import { migrations } from '../migrations';
import { type Clock, systemClock } from './clock';
import type { SettlementConfig } from './config';
import type { SettlementDB } from './db';
import { payoutRefusedConsumer, payoutReservedConsumer } from './ledger/decisions';
import { createSettlementMetrics, registerGasGauges, registerWaitingMoneyGauges } from './metrics';
import { platformPayoutOutcome, platformPayoutRoutes } from './platform/payouts';
import { refundInitiatedConsumer, refundOutcome } from './refunds/consumer';
import { RelayerChain } from './relayer/chain';
import { Relayer } from './relayer/relayer';
import { SettlementScheduler } from './schedule/scheduler';
import { sellerProjectionConsumer } from './sellers/projection';
import { settlementOperatorRoutes } from './settlements/operator-routes';
import { payoutOutcome } from './settlements/outcome';
import { SETTLEMENT_OPENAPI_PATH, settlementDocument, settlementRoutes } from './settlements/routes';
import { CheckoutSweeper } from './sweep/checkout-sweeper';
import { depositAddressAssignedConsumer, depositTransferConsumer } from './sweep/consumers';
import { DepositSweeper } from './sweep/deposit-sweeper';
import { EscrowChain } from './transfers/chain';
import { TransferWorker } from './transfers/worker';

export type RunningSettlement = Awaited<ReturnType<typeof startSettlement>>;

/** Settlement, built once; `now` is the business clock, which tests move instead of sleeping. */
export async function startSettlement(config: SettlementConfig, options: { now?: Clock } = {}) {
  const clock = options.now ?? systemClock;
  const running = await startService({
    name: 'settlement',
    config,
    migrations,
    build(ctx: ServiceContext<SettlementDB>) {
      const chain = new EscrowChain(config);
      const relayerKeys = config.relayer ? RelayerChain.pool(config, config.relayer.privateKeys) : [];
      const metrics = createSettlementMetrics(ctx, config.txTimeoutMs);
      registerWaitingMoneyGauges(ctx, config, clock);
      registerGasGauges(ctx, config, chain, relayerKeys);
      const auth = new SellerAuth(ctx.bus);
      const handlers = {
        payout: payoutOutcome(clock),
        refund: refundOutcome(clock),
        platform_payout: platformPayoutOutcome(clock),
      };
      const transfers = new TransferWorker({ ctx, config, chain, metrics, handlers });
      const scheduler = new SettlementScheduler(ctx, config, clock);
      const relayer = config.relayer
        ? new Relayer(ctx, relayerKeys, {
            ...config,
            ...config.relayer,
            escrowAddress: chain.address,
            now: clock,
          })
        : null;
      const sweeper = config.checkoutSweep ? new CheckoutSweeper(ctx, config.checkoutSweep, chain) : null;
      const { usdcEip712Name } = networks[config.network];
      const depositSweeper = new DepositSweeper(ctx, config.depositSweep, chain, usdcEip712Name, relayer);

      const decisions = { config, chain, metrics, clock, onTransferRecorded: () => transfers.kick() };
      return {
        scheduler,
        transfers,
        chain,
        relayer,
        sweeper,
        depositSweeper,
        routes: [
          ...settlementRoutes(ctx, auth),
          ...settlementOperatorRoutes(ctx, config, scheduler, clock),
          ...platformPayoutRoutes(ctx, config, clock),
        ],
        openApi: { path: SETTLEMENT_OPENAPI_PATH, document: settlementDocument },
        consumers: [
          defineConsumer(sellerProjectionConsumer(clock, config.settlementPeriodSeconds)),
          defineConsumer(refundInitiatedConsumer(decisions)),
          defineConsumer(payoutReservedConsumer(decisions)),
          defineConsumer(payoutRefusedConsumer(decisions)),
          defineConsumer(depositAddressAssignedConsumer(config.chainId)),
          defineConsumer(
            depositTransferConsumer(chain, config.checkoutSweep?.address, () => depositSweeper.kick()),
          ),
        ],
        tasks: [transfers, scheduler, relayer, sweeper, depositSweeper].filter((task) => task !== null),
        readinessChecks: [{ name: 'chain', check: () => checkChainRpc(chain.provider, config.chainId) }],
        async stop() {
          auth.close();
          chain.destroy();
          for (const key of relayerKeys) key.destroy();
        },
      };
    },
  });
  const { scheduler, transfers, chain, relayer, sweeper, depositSweeper } = running.parts;
  return { ...running, scheduler, transfers, chain, relayer, sweeper, depositSweeper };
}
