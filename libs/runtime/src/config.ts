import { formatAddress } from '@paygate/chain';
import { parseTrustedProxies, type TrustedProxies } from '@paygate/http';
import {
  type CleanedEnv,
  cleanEnv,
  EnvError,
  EnvMissingError,
  makeValidator,
  type RequiredValidatorSpec,
  str,
  url,
  type ValidatorSpec,
} from 'envalid';
import { RuntimeError } from './errors';

export { str } from 'envalid';

export interface CommonConfig {
  serviceName: string;
  port: number;
  databaseUrl: string;
  dbSchema: string;
  natsUrl: string;
  /** This service's own NATS user (NATS_USER, NATS_PASSWORD); absent on a NATS without authorization (tests' shared one). */
  natsCredentials?: { user: string; password: string };
  /** CA certificate of the NATS server's TLS certificate (NATS_CA_FILE); a `tls://` NATS_URL uses the system's CAs. */
  natsCaFile?: string;
  eventNamespace: string;
  logLevel: string;
  publicBaseUrl: string;
  production: boolean;
  /** How many times start-up tries to reach Postgres and NATS before giving up. */
  startupAttempts: number;
  /** TRUSTED_PROXIES: whose X-Forwarded-For decides the client address; k8s sets the ingress's pod range. */
  trustedProxies: TrustedProxies;
  /** The Postgres pool and its bounds (DB_POOL_SIZE, DB_STATEMENT_TIMEOUT_MS, DB_LOCK_TIMEOUT_MS, …); docs/reliability.md. */
  database?: DatabaseLimits;
  /** Copies of each JetStream stream this service creates when missing (NATS_STREAM_REPLICAS: 3 on a cluster). */
  natsStreamReplicas?: number;
}

export interface DatabaseLimits {
  poolSize: number;
  /** How long a request waits for a free connection of the pool. */
  connectTimeoutMs: number;
  statementTimeoutMs: number;
  lockTimeoutMs: number;
  /** A transaction left open (a process frozen between statements) is ended by Postgres after this. */
  idleInTransactionTimeoutMs: number;
  /** A pooled connection unused this long is closed (tests close them soon: many suites share one Postgres). */
  idleTimeoutMs: number;
}

export const DEFAULT_DATABASE_LIMITS: DatabaseLimits = {
  poolSize: 10,
  connectTimeoutMs: 5000,
  statementTimeoutMs: 15_000,
  lockTimeoutMs: 10_000,
  idleInTransactionTimeoutMs: 60_000,
  idleTimeoutMs: 30_000,
};

/** Settings that cannot be used: the message names every bad variable and its rule. */
export class ConfigError extends RuntimeError {
  override name = 'ConfigError';
}

/** An integer setting within bounds; 0 only where `min` allows it (it would mean "no limit" to a timeout). */
export function int(spec: {
  default?: number;
  min: number;
  max?: number;
  desc?: string;
}): RequiredValidatorSpec<number> {
  const { min, max = Number.MAX_SAFE_INTEGER } = spec;
  const rule =
    max === Number.MAX_SAFE_INTEGER ? `an integer of at least ${min}` : `an integer from ${min} to ${max}`;
  return makeValidator<number>((input) => {
    const value = typeof input === 'number' ? input : Number(String(input).trim());
    if (String(input).trim() === '' || !Number.isSafeInteger(value) || value < min || value > max) {
      throw new EnvError(`must be ${rule}`);
    }
    return value;
  })({
    ...(spec.default !== undefined ? { default: spec.default } : {}),
    ...(spec.desc ? { desc: spec.desc } : {}),
  });
}

/** The operator token outside production when none is set; productionGuards refuses it in production. */
export const DEV_OPERATOR_TOKEN = 'dev-operator-token';
/** The shortest OPERATOR_TOKEN any service accepts (productionGuards asks for 24 characters in production). */
const MIN_OPERATOR_TOKEN_LENGTH = 16;

/** An optional address setting (CHECKOUT_ESCROW_ADDRESS, …): checksummed, or '' when unset or blank. */
export function optionalAddress(): RequiredValidatorSpec<string> {
  return makeValidator<string>((input) => {
    const value = String(input).trim();
    if (!value) return '';
    try {
      return formatAddress(value);
    } catch {
      throw new EnvError('must be a 20-byte hex address');
    }
  })({ default: '' });
}

/** OPERATOR_TOKEN: at least 16 characters; DEV_OPERATOR_TOKEN by default outside production, none in it. */
export function operatorTokenSpec(production: boolean): RequiredValidatorSpec<string> {
  const token = makeValidator<string>((input) => {
    if (input.length < MIN_OPERATOR_TOKEN_LENGTH)
      throw new EnvError(`must be at least ${MIN_OPERATOR_TOKEN_LENGTH} characters`);
    return input;
  });
  // envalid reports a variable without a value and without a default by its desc.
  return production
    ? token({ desc: 'must be set in production (no default)' })
    : token({ default: DEV_OPERATOR_TOKEN });
}

type EnvSpecs = Record<string, ValidatorSpec<unknown>>;

/** What parseEnv makes of a spec: each variable's parsed value, typed by its validator. */
export type ParsedEnv<S extends EnvSpecs> = CleanedEnv<S>;

/**
 * Parses the environment with envalid, throwing one error naming every bad variable (an unset one by its
 * `desc`). A setting required only in production needs its own validator (operatorTokenSpec).
 */
export function parseEnv<S extends EnvSpecs>(env: NodeJS.ProcessEnv, specs: S): CleanedEnv<S>;
/** With `problems`, bad variables go there and read as undefined: throwIfProblems makes the result whole. */
export function parseEnv<S extends EnvSpecs>(
  env: NodeJS.ProcessEnv,
  specs: S,
  problems: string[],
): Partial<CleanedEnv<S>>;
export function parseEnv<S extends EnvSpecs>(
  env: NodeJS.ProcessEnv,
  specs: S,
  problems?: string[],
): CleanedEnv<S> | Partial<CleanedEnv<S>> {
  const problemOf = (key: string, error: Error) =>
    error instanceof EnvMissingError
      ? (specs[key]?.desc ?? 'must be set (it has no default)')
      : error.message;
  const parsed = cleanEnv(env, specs, {
    reporter: ({ errors }) => {
      const found = Object.entries(errors).map(([key, error]) => `${key}: ${problemOf(key, error as Error)}`);
      if (problems) problems.push(...found);
      else throwIfProblems(found);
    },
  });
  // envalid's object throws when a failed variable is read; with `problems` it reads as undefined instead.
  return problems ? { ...parsed } : parsed;
}

/** Throws one ConfigError naming every problem, if any; `parsed` (parseEnv with problems) is then whole. */
export function throwIfProblems<T extends object>(
  problems: string[],
  parsed?: Partial<T>,
): asserts parsed is T {
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
}

/** `WEBHOOK_TIMEOUT_MS` is `webhookTimeoutMs`. */
type SettingName<S extends string> = S extends `${infer Word}_${infer Rest}`
  ? `${Lowercase<Word>}${Capitalize<SettingName<Rest>>}`
  : Lowercase<S>;

/** Parsed settings under their camelCase names, the way a service's config holds them. */
export function settingsByName<T extends object>(
  parsed: T,
): { [K in keyof T & string as SettingName<K>]: T[K] } {
  return Object.fromEntries(
    Object.entries(parsed).map(([name, value]) => [
      name.toLowerCase().replace(/_([a-z0-9])/g, (_, letter: string) => letter.toUpperCase()),
      value,
    ]),
  ) as { [K in keyof T & string as SettingName<K>]: T[K] };
}

/** The variables every service reads, under the service's own defaults. */
const commonSpecs = (defaults: { schema: string; port: number }) => ({
  // 0 asks the OS for a free port (tests run many services side by side).
  PORT: int({ default: defaults.port, min: 0, max: 65535 }),
  DATABASE_URL: url({ default: 'postgres://postgres@127.0.0.1:5432/test' }),
  DB_SCHEMA: str({ default: defaults.schema }),
  NATS_URL: str({ default: 'nats://127.0.0.1:4222' }),
  NATS_USER: str({ default: '' }),
  NATS_PASSWORD: str({ default: '' }),
  NATS_CA_FILE: str({ default: '' }),
  EVENT_NAMESPACE: str({ default: 'paygate' }),
  LOG_LEVEL: str({
    default: 'info',
    choices: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
  }),
  PUBLIC_BASE_URL: url({ default: 'http://localhost:8080' }),
  NODE_ENV: str({ default: 'development' }),
  STARTUP_ATTEMPTS: int({ default: 30, min: 1, max: 1000 }),
  TRUSTED_PROXIES: str({ default: 'loopback' }),
  DB_POOL_SIZE: int({ default: DEFAULT_DATABASE_LIMITS.poolSize, min: 1, max: 200 }),
  DB_CONNECT_TIMEOUT_MS: int({ default: DEFAULT_DATABASE_LIMITS.connectTimeoutMs, min: 100, max: 120_000 }),
  DB_STATEMENT_TIMEOUT_MS: int({
    default: DEFAULT_DATABASE_LIMITS.statementTimeoutMs,
    min: 100,
    max: 600_000,
  }),
  DB_LOCK_TIMEOUT_MS: int({ default: DEFAULT_DATABASE_LIMITS.lockTimeoutMs, min: 100, max: 600_000 }),
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: int({
    default: DEFAULT_DATABASE_LIMITS.idleInTransactionTimeoutMs,
    min: 1000,
    max: 3_600_000,
  }),
  DB_IDLE_TIMEOUT_MS: int({ default: DEFAULT_DATABASE_LIMITS.idleTimeoutMs, min: 100, max: 3_600_000 }),
  NATS_STREAM_REPLICAS: int({ default: 1, min: 1, max: 5 }),
});

export function commonConfig(
  env: NodeJS.ProcessEnv,
  defaults: { serviceName: string; schema: string; port: number },
): CommonConfig {
  const parsed = parseEnv(env, commonSpecs(defaults));
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(parsed.DB_SCHEMA)) {
    throw new ConfigError('invalid configuration: DB_SCHEMA must be a lowercase SQL identifier');
  }
  const production = parsed.NODE_ENV === 'production';
  if (Boolean(parsed.NATS_USER) !== Boolean(parsed.NATS_PASSWORD)) {
    throw new ConfigError(
      'invalid configuration: NATS_USER and NATS_PASSWORD are set together or not at all',
    );
  }
  let trustedProxies: TrustedProxies;
  try {
    trustedProxies = parseTrustedProxies(parsed.TRUSTED_PROXIES);
  } catch (error) {
    throw new ConfigError(`invalid configuration: TRUSTED_PROXIES: ${(error as Error).message}`);
  }
  return {
    serviceName: defaults.serviceName,
    port: parsed.PORT,
    databaseUrl: parsed.DATABASE_URL,
    dbSchema: parsed.DB_SCHEMA,
    natsUrl: parsed.NATS_URL,
    ...(parsed.NATS_USER
      ? { natsCredentials: { user: parsed.NATS_USER, password: parsed.NATS_PASSWORD } }
      : {}),
    ...(parsed.NATS_CA_FILE ? { natsCaFile: parsed.NATS_CA_FILE } : {}),
    eventNamespace: parsed.EVENT_NAMESPACE,
    logLevel: parsed.LOG_LEVEL,
    publicBaseUrl: parsed.PUBLIC_BASE_URL.replace(/\/$/, ''),
    production,
    startupAttempts: parsed.STARTUP_ATTEMPTS,
    trustedProxies,
    database: {
      poolSize: parsed.DB_POOL_SIZE,
      connectTimeoutMs: parsed.DB_CONNECT_TIMEOUT_MS,
      statementTimeoutMs: parsed.DB_STATEMENT_TIMEOUT_MS,
      lockTimeoutMs: parsed.DB_LOCK_TIMEOUT_MS,
      idleInTransactionTimeoutMs: parsed.DB_IDLE_IN_TRANSACTION_TIMEOUT_MS,
      idleTimeoutMs: parsed.DB_IDLE_TIMEOUT_MS,
    },
    natsStreamReplicas: parsed.NATS_STREAM_REPLICAS,
  };
}
