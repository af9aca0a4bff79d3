import { defineConsumer } from '@paygate/bus';
import { checkChainRpc, networks } from '@paygate/chain';
import { type RunningService, type ServiceContext, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import { migrations } from '../migrations';
import { type Clock, systemClock } from './clock';
import type { SettlementConfig } from './config';
import type { SettlementDB } from './db';
import { payoutRefusedConsumer, payoutReservedConsumer } from './ledger/decisions';
import { createSettlementMetrics } from './metrics';
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
import { registerSettlementWatchGauges } from './watch-metrics';

export interface SettlementOptions {
  /** Business clock (settlement periods, completedAt); tests move it instead of sleeping. */
  now?: Clock;
}

export interface RunningSettlement extends RunningService<SettlementDB> {
  scheduler: SettlementScheduler;
  transfers: TransferWorker;
  chain: EscrowChain;
  /** The x402 relayer, when RELAYER_PRIVATE_KEY is configured. */
  relayer: Relayer | null;
  /** Moves the checkout deposit wallet's USDC into escrow, when CHECKOUT_ESCROW_PRIVATE_KEY is configured. */
  sweeper: CheckoutSweeper | null;
  /** Moves session deposit addresses' USDC into escrow through the relayer; serves settlement.deposit_holdings. */
  depositSweeper: DepositSweeper;
}

/**
 * Settlement, built once: the escrow and relayer chains, metrics and watch gauges, the transfer worker, scheduler,
 * x402 relayer and sweepers, then the routes, consumers and tasks that use them. The chains' providers are
 * destroyed last on stop (and on a failed start).
 */
export async function startSettlement(
  config: SettlementConfig,
  options: SettlementOptions = {},
): Promise<RunningSettlement> {
  const clock = options.now ?? systemClock;
  const running = await startService({
    name: 'settlement',
    config,
    migrations,
    build(ctx: ServiceContext<SettlementDB>) {
      const chain = new EscrowChain({
        rpcUrl: config.rpcUrl,
        chainId: config.chainId,
        usdcAddress: config.usdcAddress,
        privateKey: config.escrowPrivateKey,
        timeoutMs: config.rpcTimeoutMs,
      });
      const relayerChain = config.relayer
        ? new RelayerChain({
            rpcUrl: config.rpcUrl,
            chainId: config.chainId,
            privateKey: config.relayer.privateKey,
            timeoutMs: config.rpcTimeoutMs,
          })
        : null;
      // The pool's other keys read through the first key's provider.
      const relayerKeys =
        relayerChain && config.relayer
          ? [relayerChain, ...config.relayer.privateKeys.slice(1).map((key) => relayerChain.withKey(key))]
          : [];
      const metrics = createSettlementMetrics(ctx, config.txTimeoutMs);
      registerSettlementWatchGauges(ctx, {
        clock,
        schedulerIntervalMs: config.schedulerIntervalMs,
        settlementPeriodSeconds: config.settlementPeriodSeconds,
        provider: chain.provider,
        // Without a relayer, RELAYER_MIN_BALANCE_WEI's default (0.0005 ETH) is the floor of the other wallets.
        minBalanceWei: config.relayer?.minBalanceWei ?? 500_000_000_000_000n,
        wallets: [
          { wallet: 'escrow', address: chain.address },
          ...relayerKeys.map((key) => ({ wallet: 'relayer' as const, address: key.address })),
          ...(config.checkoutSweep
            ? [{ wallet: 'checkout' as const, address: config.checkoutSweep.address }]
            : []),
        ],
      });
      const auth = new SellerAuth(ctx.bus);
      const transfers = new TransferWorker(ctx, config, chain, metrics, {
        payout: payoutOutcome(clock),
        refund: refundOutcome(clock),
        platform_payout: platformPayoutOutcome(clock),
      });
      const scheduler = new SettlementScheduler(ctx, config, clock);
      const relayer =
        config.relayer && relayerKeys.length > 0
          ? x402Relayer(ctx, config, config.relayer, relayerKeys, chain, clock)
          : null;
      const sweeper = config.checkoutSweep
        ? new CheckoutSweeper(ctx, config.checkoutSweep, config, chain.address)
        : null;
      const depositSweeper = new DepositSweeper(
        ctx,
        config.depositSweep,
        { ...config, usdcEip712Name: networks[config.network].usdcEip712Name },
        chain.address,
        relayer,
      );

      const onTransferRecorded = () => transfers.kick();
      const decisions = { config, chain, metrics, clock, onTransferRecorded };
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
          defineConsumer(refundInitiatedConsumer(config, chain, metrics, onTransferRecorded)),
          defineConsumer(payoutReservedConsumer(decisions)),
          defineConsumer(payoutRefusedConsumer(decisions)),
          defineConsumer(depositAddressAssignedConsumer(config.chainId)),
          defineConsumer(
            depositTransferConsumer({
              chainId: config.chainId,
              usdcAddress: config.usdcAddress,
              fixedWallets: [chain.address, ...(config.checkoutSweep ? [config.checkoutSweep.address] : [])],
              onDue: () => depositSweeper.kick(),
            }),
          ),
        ],
        tasks: [transfers, scheduler, relayer, sweeper, depositSweeper].filter((task) => task !== null),
        readinessChecks: [{ name: 'chain', check: () => checkChainRpc(chain.provider, config.chainId) }],
        async stop() {
          auth.close();
          chain.destroy();
          relayerChain?.destroy();
        },
      };
    },
  });
  const { scheduler, transfers, chain, relayer, sweeper, depositSweeper } = running.parts;
  return { ...running, scheduler, transfers, chain, relayer, sweeper, depositSweeper };
}

/** The x402 relayer (RELAYER_PRIVATE_KEY configured): sends buyers' signed authorizations, paying the gas. */
function x402Relayer(
  ctx: ServiceContext<SettlementDB>,
  config: SettlementConfig,
  relayerConfig: NonNullable<SettlementConfig['relayer']>,
  relayerKeys: readonly RelayerChain[],
  chain: EscrowChain,
  clock: Clock,
): Relayer {
  return new Relayer(ctx, relayerKeys, {
    chainId: config.chainId,
    usdcAddress: config.usdcAddress,
    escrowAddress: chain.address,
    minBalanceWei: relayerConfig.minBalanceWei,
    feeBumpAfterMs: relayerConfig.feeBumpAfterMs,
    maxFeeBumps: relayerConfig.maxFeeBumps,
    maxFeePerGasCapWei: relayerConfig.maxFeePerGasCapWei,
    receiptPollMs: relayerConfig.receiptPollMs,
    headsWsUrl: relayerConfig.headsWsUrl,
    pollIntervalMs: config.transferPollIntervalMs,
    lookbackBlocks: relayerConfig.lookbackBlocks,
    confirmations: config.confirmations,
    dbSchema: config.dbSchema,
    revertRefusalMs: relayerConfig.revertRefusalMs,
    stuckAfterMs: relayerConfig.stuckAfterMs,
    codeHashRefusalPayers: relayerConfig.codeHashRefusalPayers,
    now: clock,
  });
}
