/**
 * The services a payment crosses on its way to the seller, started together on one anvil for end-to-end
 * money tests: chain-indexer -> checkout -> escrow-ledger -> settlement, all with the same movable clock.
 */

import { loadConfig as loadIndexerConfig, startChainIndexer } from '@paygate/chain-indexer';
import { loadConfig as loadCheckoutConfig, startCheckout } from '@paygate/checkout';
import {
  loadConfig as loadSettlementConfig,
  type RunningSettlement,
  startSettlement,
} from '@paygate/settlement';
import { type TestEnvironment, testWallets } from '@paygate/testing';
import { loadConfig, type RunningEscrowLedger, startEscrowLedger } from '../src';

export interface MoneyServices {
  indexer: Awaited<ReturnType<typeof startChainIndexer>>;
  ledger: RunningEscrowLedger;
  checkout: Awaited<ReturnType<typeof startCheckout>>;
  settlement: RunningSettlement;
  stop(): Promise<void>;
}

export async function startMoneyServices(options: {
  env: TestEnvironment;
  rpcUrl: string;
  usdcAddress: string;
  operatorToken: string;
  clock: () => Date;
  ledgerEnv?: Record<string, string>;
  /** Over the indexer's defaults (e.g. more CONFIRMATIONS than a gateway, to order a proof before the match). */
  indexerEnv?: Record<string, string>;
  /**
   * The checkout wallet, distinct from the escrow (CHECKOUT_ESCROW_ADDRESS for every service, its key and sweep
   * interval for settlement); testWallets.checkoutEscrow unless given.
   */
  checkoutEscrow?: { address: string; privateKey: string; sweepIntervalMs?: number };
}): Promise<MoneyServices> {
  const { env, clock } = options;
  // Checkout's amount-matched sessions are paid to the checkout wallet: every service knows it, settlement sweeps it.
  options = { ...options, checkoutEscrow: options.checkoutEscrow ?? testWallets.checkoutEscrow };
  const chainEnv = {
    CHAIN_RPC_URL: options.rpcUrl,
    USDC_ADDRESS: options.usdcAddress,
    ESCROW_ADDRESS: testWallets.escrow.address,
    ...(options.checkoutEscrow ? { CHECKOUT_ESCROW_ADDRESS: options.checkoutEscrow.address } : {}),
  };
  const sweepEnv: Record<string, string> = options.checkoutEscrow
    ? {
        CHECKOUT_ESCROW_PRIVATE_KEY: options.checkoutEscrow.privateKey,
        CHECKOUT_SWEEP_INTERVAL_MS: String(options.checkoutEscrow.sweepIntervalMs ?? 200),
      }
    : {};
  const indexer = await startChainIndexer(
    loadIndexerConfig(
      env.envFor('chain-indexer', { ...chainEnv, CONFIRMATIONS: '1', ...options.indexerEnv }),
    ),
  );
  const ledger = await startEscrowLedger({
    ...loadConfig(
      env.envFor('escrow-ledger', {
        ...chainEnv,
        OPERATOR_TOKEN: options.operatorToken,
        ...options.ledgerEnv,
      }),
    ),
    now: clock,
  });
  const checkout = await startCheckout(
    loadCheckoutConfig(env.envFor('checkout', { ...chainEnv, OPERATOR_TOKEN: options.operatorToken }), clock),
  );
  const settlement = await startSettlement(
    loadSettlementConfig(
      env.envFor('settlement', {
        ...chainEnv,
        CHAIN_NETWORK: 'local',
        ESCROW_PRIVATE_KEY: testWallets.escrow.privateKey,
        CONFIRMATIONS: '1',
        SCHEDULER_INTERVAL_MS: '3600000',
        TRANSFER_POLL_INTERVAL_MS: '100',
        TX_TIMEOUT_MS: '5000',
        RPC_TIMEOUT_MS: '3000',
        // No cap in these flows: the unmatched-refund e2e returns a single transfer above ten billion USDC.
        MAX_TRANSFER_USDC: '9000000000000',
        // The relayer submits the sweeps of session deposit addresses into escrow (it pays their gas).
        RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey,
        CHECKOUT_SWEEP_INTERVAL_MS: '200',
        ...sweepEnv,
      }),
    ),
    { now: clock },
  );
  return {
    indexer,
    ledger,
    checkout,
    settlement,
    async stop() {
      await settlement.stop();
      await checkout.stop();
      await ledger.stop();
      await indexer.stop();
    },
  };
}
