export {
  anchorStreamStore,
  type Bus,
  connectBus,
  deleteStreams,
  ensureStreams,
  STORE_ANCHOR_STREAM,
  streamNames,
} from './connection';
export {
  type BatchEventHandler,
  backoffDelayMs,
  type ConsumerOptions,
  type EventHandler,
  encodeEnvelope,
  InboxConsumer,
} from './consumer';
export { listDeadLetters, replayDeadLetter } from './dead-letters';
export { isConsumerExistsError, isJetStreamError, JetStreamErrorCode, jetStreamErrorCode } from './errors';
export { busMigrations } from './migrations';
export { enqueueEvent, OutboxRelay } from './outbox';
export { type PassOutcome, PollingLoop, type PollingLoopOptions } from './polling-loop';
export { type RpcServer, RpcServiceError, RpcUnavailableError, requestRpc, serveRpc, serveRpcs } from './rpc';
export type { BusTables } from './tables';
