// The one background loop and backoff live in the bus library, below the runtime, for the relay and consumers.
export { type BackoffPolicy, backoffDelayMs, type PassOutcome, PolledTask, PollingLoop } from '@paygate/bus';
export { type ChainConfig, chainConfig } from './chain-config';
export {
  type CommonConfig,
  ConfigError,
  commonConfig,
  DEFAULT_DATABASE_LIMITS,
  DEV_OPERATOR_TOKEN,
  int,
  operatorTokenSpec,
  optionalAddress,
  type ParsedEnv,
  parseEnv,
  settingsByName,
  str,
  throwIfProblems,
} from './config';
export {
  applyRepeatableSql,
  createDatabase,
  dropSchema,
  migrateToLatest,
  preparedStatement,
  type RepeatableSql,
  readRepeatableSql,
} from './database';
export { NotReadyError, StartupError, UndeclaredConsumerError } from './errors';
export { runMain } from './main';
export { Counter, Gauge, Registry, type ServiceMetrics } from './metrics';
export { productionGuards } from './production';
export { retryStartup } from './retry';
export { SecretBox } from './secret-box';
export {
  type BackgroundTask,
  type RunningService,
  type ServiceContext,
  type ServiceParts,
  type StartedService,
  startService,
} from './service';
export { isTransactionConflict, transactionRetryingConflicts } from './transaction';
export { WriteBatcher } from './write-batcher';
