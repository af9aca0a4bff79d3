import {
  ConfigError,
  chainConfig,
  commonConfig,
  int,
  optionalAddress,
  parseEnv,
  productionGuards,
  settingsByName,
} from '@paygate/runtime';

/** Chain settings (a transfer is published once it has `confirmations`) plus the indexer's own (README table). */
export type ChainIndexerConfig = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  const common = commonConfig(env, { serviceName: 'chain-indexer', schema: 'indexer', port: 8084 });
  const chain = chainConfig(env, { rpcTimeoutMs: 5000 });
  const parsed = parseEnv(env, {
    // Well inside the block time, so a new block is seen within 250 ms.
    POLL_INTERVAL_MS: int({ default: 50, min: 1, max: 60_000 }),
    MAX_RANGE_BLOCKS: int({ default: 2000, min: 1 }),
    // A long catch-up commits progress as it goes.
    MAX_BLOCKS_PER_PASS: int({ default: 20_000, min: 1 }),
    REORG_WINDOW_BLOCKS: int({ default: 128, min: 1 }),
    DEEP_REORG_SEARCH_BLOCKS: int({ default: 1000, min: 1, max: 100_000 }),
    START_BLOCK: int({ default: 0, min: 0 }),
    LEADER_RETRY_MS: int({ default: 1000, min: 1 }),
    CHECKOUT_ESCROW_ADDRESS: optionalAddress(),
    MAX_WATCHED_DEPOSIT_ADDRESSES: int({ default: 200_000, min: 1 }),
    ADDRESSES_PER_LOG_QUERY: int({ default: 1000, min: 1 }),
    // 1 h of Base blocks: far more than an assignment takes to reach the indexer.
    DEPOSIT_BACKFILL_BLOCKS: int({ default: 1800, min: 1 }),
    // 7 days of Base blocks.
    DEPOSIT_BACKFILL_MAX_BLOCKS: int({ default: 302_400, min: 1 }),
  });
  const checkoutEscrowAddress = parsed.CHECKOUT_ESCROW_ADDRESS || null;
  const watchedAddresses = [chain.escrowAddress];
  if (checkoutEscrowAddress && checkoutEscrowAddress !== chain.escrowAddress) {
    watchedAddresses.push(checkoutEscrowAddress);
  }
  if (parsed.REORG_WINDOW_BLOCKS < chain.confirmations) {
    throw new ConfigError('invalid configuration: REORG_WINDOW_BLOCKS must be at least CONFIRMATIONS');
  }
  productionGuards(env, {
    serviceName: common.serviceName,
    production: common.production,
    escrow: { address: chain.escrowAddress },
    rpcPolling: { url: chain.rpcUrl, intervalMs: parsed.POLL_INTERVAL_MS, variable: 'POLL_INTERVAL_MS' },
    sharedConfirmations: true,
    checkoutWallet: true,
  });
  return {
    ...common,
    ...chain,
    ...settingsByName(parsed),
    checkoutEscrowAddress,
    watchedAddresses,
    depositBackfillBlocks: Math.max(parsed.DEPOSIT_BACKFILL_BLOCKS, parsed.REORG_WINDOW_BLOCKS),
    depositBackfillMaxBlocks: Math.max(parsed.DEPOSIT_BACKFILL_MAX_BLOCKS, parsed.DEPOSIT_BACKFILL_BLOCKS),
  };
}
