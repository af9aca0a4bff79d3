import {
  type ChainConfig,
  type CommonConfig,
  ConfigError,
  chainConfig,
  commonConfig,
  int,
  optionalAddress,
  parseEnv,
  productionGuards,
} from '@paygate/runtime';

/** Chain settings (a transfer is published once it has `confirmations`) plus the indexer's own. */
export interface ChainIndexerConfig extends CommonConfig, ChainConfig {
  /** How often the head is polled; well inside the block time so a new block is seen within 250 ms. */
  pollIntervalMs: number;
  maxRangeBlocks: number;
  /** Blocks scanned in one pass at most, so a long catch-up commits progress as it goes. */
  maxBlocksPerPass: number;
  /** Recent block hashes kept to detect reorgs (and to find their common ancestor). */
  reorgWindowBlocks: number;
  /** Older known blocks read at most for a reorg deeper than the window; deeper still it is not undone. */
  deepReorgSearchBlocks: number;
  /** First block to scan when there is no cursor yet (the escrow wallet's first use). */
  startBlock: number;
  leaderRetryMs: number;
  /** CHECKOUT_ESCROW_ADDRESS (optional): the checkout wallet, watched beside the agent escrow. */
  checkoutEscrowAddress: string | null;
  /** The fixed wallets whose incoming USDC is reported: the escrow, and the checkout deposit wallet when set. */
  watchedAddresses: string[];
  /** Deposit addresses named in the log filters at most; beyond it every transfer is read. */
  maxWatchedDepositAddresses: number;
  /** Recipients per eth_getLogs call (its topic list); more addresses make more calls over the same range. */
  addressesPerLogQuery: number;
  /** A newly heard-of deposit address is first searched this many blocks back (it may already have been paid). */
  depositBackfillBlocks: number;
  /** ...and, when the indexer heard of it late (a backlog after a restart), back to its assignment time, at most this far. */
  depositBackfillMaxBlocks: number;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): ChainIndexerConfig {
  const common = commonConfig(env, { serviceName: 'chain-indexer', schema: 'indexer', port: 8084 });
  const chain = chainConfig(env, { rpcTimeoutMs: 5000 });
  const parsed = parseEnv(env, {
    POLL_INTERVAL_MS: int({ default: 50, min: 1, max: 60_000 }),
    MAX_RANGE_BLOCKS: int({ default: 2000, min: 1 }),
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
    pollIntervalMs: parsed.POLL_INTERVAL_MS,
    maxRangeBlocks: parsed.MAX_RANGE_BLOCKS,
    maxBlocksPerPass: parsed.MAX_BLOCKS_PER_PASS,
    reorgWindowBlocks: parsed.REORG_WINDOW_BLOCKS,
    deepReorgSearchBlocks: parsed.DEEP_REORG_SEARCH_BLOCKS,
    startBlock: parsed.START_BLOCK,
    leaderRetryMs: parsed.LEADER_RETRY_MS,
    checkoutEscrowAddress,
    watchedAddresses,
    maxWatchedDepositAddresses: parsed.MAX_WATCHED_DEPOSIT_ADDRESSES,
    addressesPerLogQuery: parsed.ADDRESSES_PER_LOG_QUERY,
    depositBackfillBlocks: Math.max(parsed.DEPOSIT_BACKFILL_BLOCKS, parsed.REORG_WINDOW_BLOCKS),
    depositBackfillMaxBlocks: Math.max(parsed.DEPOSIT_BACKFILL_MAX_BLOCKS, parsed.DEPOSIT_BACKFILL_BLOCKS),
  };
}
