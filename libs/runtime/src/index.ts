// The one kickable, non-overlapping background loop (it lives in the bus library so the outbox relay can use it).
export { type PassOutcome, PollingLoop, type PollingLoopOptions } from '@paygate/bus';
export * from './chain-config';
export * from './config';
export * from './database';
export * from './main';
export * from './metrics';
export * from './retry';
export * from './service';
