import {
  ConfigError,
  commonConfig,
  int,
  operatorTokenSpec,
  optionalAddress,
  parseEnv,
  productionGuards,
  settingsByName,
  str,
} from '@paygate/runtime';

export type RegistryConfig = ReturnType<typeof loadConfig>;

const DEV_SESSION_SECRET = 'dev-session-secret-not-for-production';
const DEV_SECRETS_KEY = 'dev-secrets-key-not-for-production';

/** CHAIN_NETWORK's chain id (the networks of @paygate/chain, which the registry does not otherwise need). */
const CHAIN_IDS: Readonly<Record<string, number>> = { base: 8453, 'base-sepolia': 84532, local: 31337 };
const HOUR_MS = 60 * 60 * 1000;

/** Parses the environment once; throws a ConfigError naming every bad variable. `now`: tests move time. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, now: () => Date = () => new Date()) {
  const common = commonConfig(env, { serviceName: 'registry', schema: 'registry', port: 8081 });
  const parsed = parseEnv(env, {
    SESSION_SECRET: str({ default: DEV_SESSION_SECRET }),
    SESSION_TTL_MS: int({ default: 12 * 60 * 60 * 1000, min: 1 }),
    SIWE_NONCE_TTL_MS: int({ default: 5 * 60 * 1000, min: 1 }),
    OPERATOR_TOKEN: operatorTokenSpec(common.production),
    SECRETS_ENCRYPTION_KEY: str({ default: DEV_SECRETS_KEY }),
    VALIDATION_INTERVAL_MS: int({ default: 1000, min: 1 }),
    VALIDATION_CONCURRENCY: int({ default: 4, min: 1, max: 64 }),
    VALIDATION_TIMEOUT_MS: int({ default: 5000, min: 1, max: 5000 }),
    HEALTH_INTERVAL_MS: int({ default: 60_000, min: 1 }),
    HEALTH_BATCH_SIZE: int({ default: 20, min: 1, max: 64 }),
    HEALTH_CONCURRENCY: int({ default: 4, min: 1, max: 64 }),
    // Refused as a payout address: a payout there never leaves escrow.
    ESCROW_ADDRESS: optionalAddress(),
    SIWE_NONCES_PER_MINUTE: int({ default: 30, min: 1 }),
    SIGN_INS_PER_MINUTE: int({ default: 30, min: 1 }),
    ACCOUNTS_PER_HOUR: int({ default: 20, min: 1 }),
    // Archived skills included: a free account could otherwise take names in bulk.
    MAX_SKILLS_PER_SELLER: int({ default: 100, min: 1 }),
    PAYOUT_CHALLENGES_PER_MINUTE: int({ default: 10, min: 1 }),
    CHAIN_NETWORK: str({ default: 'local' }),
    // Settlement pays the old payout address until the signed change takes effect.
    PAYOUT_ADDRESS_DELAY_MS: int({ default: 48 * HOUR_MS, min: 0, max: 30 * 24 * HOUR_MS }),
    PAYOUT_CHALLENGE_TTL_MS: int({ default: 10 * 60 * 1000, min: 1 }),
    KEY_ROTATION_OVERLAP_MS: int({ default: 24 * HOUR_MS, min: 0, max: 30 * 24 * HOUR_MS }),
    ACCOUNT_CHANGES_INTERVAL_MS: int({ default: 1000, min: 1 }),
  });
  const chainId = CHAIN_IDS[parsed.CHAIN_NETWORK];
  if (chainId === undefined)
    throw new ConfigError('invalid configuration: CHAIN_NETWORK must be local, base or base-sepolia');
  // SECRETS_ENCRYPTION_KEY is the webhook key: it encrypts every seller's webhook signing secret at rest (the
  // notifier asks the registry for them over NATS and holds no key of its own).
  productionGuards(env, {
    serviceName: common.serviceName,
    production: common.production,
    secrets: [
      { name: 'SESSION_SECRET', minLength: 32 },
      'OPERATOR_TOKEN',
      { name: 'SECRETS_ENCRYPTION_KEY', minLength: 32 },
    ],
  });
  return {
    ...common,
    ...settingsByName(parsed),
    escrowAddress: parsed.ESCROW_ADDRESS.toLowerCase() || null,
    chainId,
    now,
  };
}
