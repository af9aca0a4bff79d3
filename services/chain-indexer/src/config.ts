import { networkByName } from '@paygate/chain';
import { type CommonConfig, ConfigError, commonConfig, num, parseEnv, str } from '@paygate/runtime';
import { getAddress } from 'ethers';

export interface ChainIndexerConfig extends CommonConfig {
  rpcUrl: string;
  network: ReturnType<typeof networkByName>;
  usdcAddress: string;
  escrowAddress: string;
  /** A transfer is published once its block has this many confirmations (its own block counts as one). */
  confirmations: number;
  /** How often the head is polled; well inside the block time so a new block is seen within 250 ms. */
  pollIntervalMs: number;
  maxRangeBlocks: number;
  /** Blocks scanned in one pass at most, so a long catch-up commits progress as it goes. */
  maxBlocksPerPass: number;
  /** Recent block hashes kept to detect reorgs; deeper reorgs are out of scope by configuration. */
  reorgWindowBlocks: number;
  /** First block to scan when there is no cursor yet (the escrow wallet's first use). */
  startBlock: number;
  rpcTimeoutMs: number;
  leaderRetryMs: number;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): ChainIndexerConfig {
  const common = commonConfig(env, { serviceName: 'chain-indexer', schema: 'indexer', port: 8084 });
  const parsed = parseEnv<{
    CHAIN_RPC_URL: string;
    CHAIN_NETWORK: string;
    USDC_ADDRESS: string;
    ESCROW_ADDRESS: string;
    CONFIRMATIONS: number;
    POLL_INTERVAL_MS: number;
    MAX_RANGE_BLOCKS: number;
    MAX_BLOCKS_PER_PASS: number;
    REORG_WINDOW_BLOCKS: number;
    START_BLOCK: number;
    RPC_TIMEOUT_MS: number;
    LEADER_RETRY_MS: number;
  }>(env, {
    CHAIN_RPC_URL: str({ default: 'http://127.0.0.1:8545' }),
    CHAIN_NETWORK: str({ default: 'local', choices: ['local', 'base', 'base-sepolia'] }),
    USDC_ADDRESS: str({ default: '' }),
    ESCROW_ADDRESS: str(),
    CONFIRMATIONS: num({ default: 2 }),
    POLL_INTERVAL_MS: num({ default: 50 }),
    MAX_RANGE_BLOCKS: num({ default: 2000 }),
    MAX_BLOCKS_PER_PASS: num({ default: 20_000 }),
    REORG_WINDOW_BLOCKS: num({ default: 128 }),
    START_BLOCK: num({ default: 0 }),
    RPC_TIMEOUT_MS: num({ default: 5000 }),
    LEADER_RETRY_MS: num({ default: 1000 }),
  });
  const network = networkByName(parsed.CHAIN_NETWORK);
  const usdc = parsed.USDC_ADDRESS || network.usdcAddress;
  if (!usdc) throw new ConfigError('invalid configuration: USDC_ADDRESS is required on the local network');
  const address = (name: string, value: string) => {
    try {
      return getAddress(value);
    } catch {
      throw new ConfigError(`invalid configuration: ${name} must be a 20-byte hex address`);
    }
  };
  if (parsed.CONFIRMATIONS < 1)
    throw new ConfigError('invalid configuration: CONFIRMATIONS must be at least 1');
  if (parsed.REORG_WINDOW_BLOCKS < parsed.CONFIRMATIONS) {
    throw new ConfigError('invalid configuration: REORG_WINDOW_BLOCKS must be at least CONFIRMATIONS');
  }
  return {
    ...common,
    rpcUrl: parsed.CHAIN_RPC_URL,
    network,
    usdcAddress: address('USDC_ADDRESS', usdc),
    escrowAddress: address('ESCROW_ADDRESS', parsed.ESCROW_ADDRESS),
    confirmations: parsed.CONFIRMATIONS,
    pollIntervalMs: parsed.POLL_INTERVAL_MS,
    maxRangeBlocks: parsed.MAX_RANGE_BLOCKS,
    maxBlocksPerPass: parsed.MAX_BLOCKS_PER_PASS,
    reorgWindowBlocks: parsed.REORG_WINDOW_BLOCKS,
    startBlock: parsed.START_BLOCK,
    rpcTimeoutMs: parsed.RPC_TIMEOUT_MS,
    leaderRetryMs: parsed.LEADER_RETRY_MS,
  };
}
