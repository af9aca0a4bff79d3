// The one background loop and backoff live in the bus library, below the runtime, for the relay and consumers.
export { type BackoffPolicy, backoffDelayMs, type PassOutcome, PolledTask, PollingLoop } from '@paygate/bus';
export * from './chain-config';
export * from './config';
export * from './database';
export * from './errors';
export * from './main';
export * from './metrics';
export * from './production';
export * from './retry';
export * from './secret-box';
export * from './service';
export * from './transaction';
export * from './write-batcher';
