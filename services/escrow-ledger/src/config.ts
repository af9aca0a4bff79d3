import { networkByName } from '@paygate/chain';
import { type CommonConfig, ConfigError, commonConfig, num, parseEnv, str, url } from '@paygate/runtime';

export interface EscrowLedgerConfig extends CommonConfig {
  /** Bearer token of the operator routes (conflicts, suspense, reconciliation). */
  operatorToken: string;
  chainRpcUrl: string;
  chainNetwork: string;
  chainId: number;
  usdcAddress: string;
  /** The escrow wallet whose on-chain USDC balance the ledger reconciles with. */
  escrowAddress: string;
  rpcTimeoutMs: number;
  /** How often the release scheduler looks for holds whose period has passed. */
  releaseIntervalMs: number;
  /** Holds released per scheduler transaction. */
  releaseBatchSize: number;
  /** payment.confirmed events booked per database transaction (one commit for the whole batch). */
  paymentBatchSize: number;
  /** Parallel batches of payment.confirmed (each is its own transaction). */
  paymentConcurrency: number;
  /** The service clock: tests inject one to move time without sleeping. */
  now: () => Date;
}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): EscrowLedgerConfig {
  const common = commonConfig(env, { serviceName: 'escrow-ledger', schema: 'ledger', port: 8085 });
  const parsed = parseEnv<{
    OPERATOR_TOKEN: string;
    CHAIN_RPC_URL: string;
    CHAIN_NETWORK: string;
    USDC_ADDRESS: string;
    ESCROW_ADDRESS: string;
    RPC_TIMEOUT_MS: number;
    RELEASE_INTERVAL_MS: number;
    RELEASE_BATCH_SIZE: number;
    PAYMENT_BATCH_SIZE: number;
    PAYMENT_CONCURRENCY: number;
  }>(env, {
    OPERATOR_TOKEN: str({ default: common.production ? undefined : 'dev-operator-token' }),
    CHAIN_RPC_URL: url({ default: 'http://127.0.0.1:8545' }),
    CHAIN_NETWORK: str({ default: 'local', choices: ['base', 'base-sepolia', 'local'] }),
    USDC_ADDRESS: str({ default: '' }),
    ESCROW_ADDRESS: str({ default: '' }),
    RPC_TIMEOUT_MS: num({ default: 10_000 }),
    RELEASE_INTERVAL_MS: num({ default: 5_000 }),
    RELEASE_BATCH_SIZE: num({ default: 200 }),
    PAYMENT_BATCH_SIZE: num({ default: 200 }),
    PAYMENT_CONCURRENCY: num({ default: 2 }),
  });
  const problems: string[] = [];
  const network = networkByName(parsed.CHAIN_NETWORK);
  const usdcAddress = parsed.USDC_ADDRESS || network.usdcAddress || '';
  const address = /^0x[0-9a-fA-F]{40}$/;
  if (usdcAddress && !address.test(usdcAddress))
    problems.push('USDC_ADDRESS: must be a 0x-prefixed 20-byte address');
  if (parsed.ESCROW_ADDRESS && !address.test(parsed.ESCROW_ADDRESS)) {
    problems.push('ESCROW_ADDRESS: must be a 0x-prefixed 20-byte address');
  }
  if (parsed.OPERATOR_TOKEN.length < 16) problems.push('OPERATOR_TOKEN: must be at least 16 characters');
  for (const [name, value] of [
    ['RPC_TIMEOUT_MS', parsed.RPC_TIMEOUT_MS],
    ['RELEASE_INTERVAL_MS', parsed.RELEASE_INTERVAL_MS],
    ['RELEASE_BATCH_SIZE', parsed.RELEASE_BATCH_SIZE],
    ['PAYMENT_BATCH_SIZE', parsed.PAYMENT_BATCH_SIZE],
    ['PAYMENT_CONCURRENCY', parsed.PAYMENT_CONCURRENCY],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < 1) problems.push(`${name}: must be a positive integer`);
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  return {
    ...common,
    operatorToken: parsed.OPERATOR_TOKEN,
    chainRpcUrl: parsed.CHAIN_RPC_URL,
    chainNetwork: network.name,
    chainId: network.chainId,
    usdcAddress,
    escrowAddress: parsed.ESCROW_ADDRESS,
    rpcTimeoutMs: parsed.RPC_TIMEOUT_MS,
    releaseIntervalMs: parsed.RELEASE_INTERVAL_MS,
    releaseBatchSize: Math.min(parsed.RELEASE_BATCH_SIZE, 1000),
    paymentBatchSize: Math.min(parsed.PAYMENT_BATCH_SIZE, 1000),
    paymentConcurrency: Math.min(parsed.PAYMENT_CONCURRENCY, 16),
    now: () => new Date(),
  };
}
