// The one kickable, non-overlapping background loop and the one backoff (they live in the bus library, which sits
// below the runtime, so the outbox relay and the consumers use them too).
export {
  type BackoffPolicy,
  backoffDelayMs,
  type PassOutcome,
  PolledTask,
  PollingLoop,
  type PollingLoopOptions,
} from '@paygate/bus';
export { type ChainConfig, chainConfig } from './chain-config';
export {
  type CommonConfig,
  ConfigError,
  commonConfig,
  type DatabaseLimits,
  DEFAULT_DATABASE_LIMITS,
  DEV_OPERATOR_TOKEN,
  type EnvSpecs,
  int,
  MIN_OPERATOR_TOKEN_LENGTH,
  num,
  operatorTokenSpec,
  optionalAddress,
  type ParsedEnv,
  parseEnv,
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
export { runMain } from './main';
export { Counter, Gauge, Registry, type ServiceMetrics } from './metrics';
export {
  isPublicDevKey,
  type ProductionGuardOptions,
  productionGuards,
  weakSecretProblem,
} from './production';
export { retryStartup } from './retry';
export { SecretBox } from './secret-box';
export { type BackgroundTask, type RunningService, type ServiceContext, startService } from './service';
export {
  isTransactionConflict,
  TRANSACTION_CONFLICT_ATTEMPTS,
  transactionRetryingConflicts,
} from './transaction';
export { WriteBatcher, type WriteBatcherOptions } from './write-batcher';
