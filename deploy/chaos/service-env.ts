/**
 * Every replica's environment in a chaos run: the run's Postgres and schema, its NATS user, the balancer as the
 * public base URL, the chain behind the RPC fault proxy, and each service's short intervals (so a run drains
 * within its bound).
 */
import type { NatsPasswords } from '@paygate/bus';
import { testWallets } from '@paygate/testing';
import { SCHEMAS } from '../service-schemas';

export const OPERATOR_TOKEN = 'chaos-operator-token-not-secret-000';
/** A failing call's window in the run (production: 600 s): closed, refunded and checked within the drain. */
export const RETRY_WINDOW_SECONDS = 5;
const SESSION_SECRET = 'chaos-session-secret-not-secret-0123456789';

/** What a run started that its replicas reach. */
export interface RunEndpoints {
  databaseUrl: string;
  natsUrl: string;
  namespace: string;
  passwords: NatsPasswords;
  publicBaseUrl: string;
  rpcUrl: string;
  chainId: number;
  usdcAddress: string;
}

export function serviceEnv(service: string, run: RunEndpoints): NodeJS.ProcessEnv {
  return {
    DATABASE_URL: run.databaseUrl,
    DB_SCHEMA: SCHEMAS[service],
    NATS_URL: run.natsUrl,
    NATS_USER: service,
    NATS_PASSWORD: run.passwords[service as keyof NatsPasswords],
    EVENT_NAMESPACE: run.namespace,
    PUBLIC_BASE_URL: run.publicBaseUrl,
    CHAIN_RPC_URL: run.rpcUrl,
    CHAIN_NETWORK: 'local',
    CHAIN_ID: String(run.chainId),
    USDC_ADDRESS: run.usdcAddress,
    ESCROW_ADDRESS: testWallets.escrow.address,
    CHECKOUT_ESCROW_ADDRESS: testWallets.checkoutEscrow.address,
    // More blocks than the deepest reorg drawn (3): within the system's stated assumption, a reorg never
    // undoes an accepted payment or a confirmed payout. CHAOS_CONFIRMATIONS=1 shows what a deeper one does.
    CONFIRMATIONS: process.env.CHAOS_CONFIRMATIONS ?? '4',
    OPERATOR_TOKEN,
    SESSION_SECRET,
    PAYOUT_ADDRESS_DELAY_MS: '0',
    LOG_LEVEL: process.env.CHAOS_LOG_LEVEL ?? 'warn',
    NODE_ENV: 'development',
    STARTUP_ATTEMPTS: '120',
    ...OWN_SETTINGS[service]?.(run),
  };
}

/** Each service's own settings in a run: its keys, and intervals short enough that a run drains within its bound. */
const OWN_SETTINGS: Record<string, (run: RunEndpoints) => NodeJS.ProcessEnv> = {
  settlement: () => ({
    ESCROW_PRIVATE_KEY: testWallets.escrow.privateKey,
    CHECKOUT_ESCROW_PRIVATE_KEY: testWallets.checkoutEscrow.privateKey,
    RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey,
    TREASURY_ADDRESS: testWallets.platform.address,
    SETTLEMENT_PERIOD_SECONDS: '60',
    SCHEDULER_INTERVAL_MS: '5000',
    TX_TIMEOUT_MS: '30000',
  }),
  'escrow-ledger': () => ({
    RELEASE_INTERVAL_MS: '1000',
    REFUND_REQUESTS_PER_MINUTE: '100000',
    // Receipts of payments booked before CONFIRMATIONS (x402) checked every second: a dropped one is
    // reversed within seconds of CONFIRMATIONS blocks, inside the drain.
    CHAIN_CHECK_INTERVAL_MS: '1000',
    // Unserved calls refunded within the run: a payer's refunds go out once two failing calls (0.010 or more each)
    // add up to the threshold, a single one after 15 s, and undecided calls are looked at again every second.
    UNSERVED_REFUND_THRESHOLD: '0.02',
    UNSERVED_REFUND_MAX_AGE_MS: '15000',
    UNSERVED_SWEEP_INTERVAL_MS: '1000',
  }),
  registry: () => ({ VALIDATION_INTERVAL_MS: '500' }),
  // Every buyer of the load calls from 127.0.0.1, where real agents each have their own address: limits per
  // client address would answer most of the load 429 (683 of 1,918 operations in one run) instead of working.
  'gateway-proxy': () => ({
    RATE_LIMIT_PER_MINUTE: '100000',
    // The load presents a failed purchase again within the window.
    RETRY_WINDOW_SECONDS: String(RETRY_WINDOW_SECONDS),
    // The failing skill's upstream that never answers holds a call this long (production: 10 s).
    UPSTREAM_TIMEOUT_MS: '4000',
  }),
  checkout: () => ({
    SESSION_RATE_LIMIT_PER_CLIENT: '100000',
    // Sessions expire within the run, so the load pays some after expiry (paid_late) and a payment delayed by a
    // fault is late too, in both matching modes.
    SESSION_TTL_SECONDS: '10',
  }),
  notifier: () => ({
    // Short waits: a run drains within seconds of the last fault although half the deliveries fail.
    WEBHOOK_TIMEOUT_MS: '2000',
    WEBHOOK_RETRY_BASE_DELAY_MS: '500',
    WEBHOOK_RETRY_MAX_DELAY_MS: '2000',
    WEBHOOK_CLAIM_LEASE_MS: '6000',
    WEBHOOK_POLL_INTERVAL_MS: '500',
    // Half the deliveries fail, many by hanging until the timeout: more in flight so the backlog of a
    // 1,000-operation run drains within the bound (8 per replica drained about 8 a second).
    WEBHOOK_CONCURRENCY: '32',
    WEBHOOK_BATCH_SIZE: '64',
    // The run's few sellers share that one flaky receiver: their in-flight caps and breaker waits are sized to
    // the short waits above, not to a hostile seller among thousands (the defaults).
    WEBHOOK_SELLER_MAX_IN_FLIGHT: '24',
    WEBHOOK_ENDPOINT_MAX_IN_FLIGHT: '24',
    WEBHOOK_SELLER_SHARE: '16',
    WEBHOOK_ENDPOINT_SHARE: '16',
    WEBHOOK_BREAKER_COOLDOWN_MS: '500',
    WEBHOOK_BREAKER_MAX_COOLDOWN_MS: '2000',
  }),
};
