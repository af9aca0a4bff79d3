export { type BackoffPolicy, backoffCeilingMs, backoffDelayMs } from './backoff';
export {
  anchorStreamStore,
  type Bus,
  connectBus,
  deleteStreams,
  ensureStreams,
  natsServerList,
  streamNames,
} from './connection';
export {
  type ConsumerOptions,
  consumersOf,
  type DeclaredConsumer,
  defineConsumer,
  encodeEnvelope,
  InboxConsumer,
} from './consumer';
export { listDeadLetters, replayDeadLetter } from './dead-letters';
export {
  isJetStreamError,
  isTransientJetStreamError,
  JetStreamErrorCode,
  jetStreamErrorCode,
} from './errors';
export {
  type ClaimedVia,
  LEDGER_CLAIM_TIMEOUT_MS,
  LedgerClaimClient,
  type LedgerClaimRequest,
  type LedgerClaimResult,
} from './ledger-claims';
export { busMigrations, reorgTombstoneMigrations } from './migrations';
export { type AuthorizedNatsServer, findNatsServerBinary, startAuthorizedNatsServer } from './nats-server';
export { EventTooLargeError, enqueueEvent, MAX_EVENT_BYTES, OutboxRelay } from './outbox';
export {
  ADMIN_USER,
  generateNatsPasswords,
  type NatsPasswords,
  renderNatsAuthorization,
} from './permissions';
export { type PassOutcome, PolledTask, PollingLoop } from './polling-loop';
export { publishDurably } from './publish';
export { leaveReorgTombstone, lockTransferEvents, takeReorgTombstone } from './reorg-tombstones';
export {
  REPLY_KEY_HEADER,
  type RpcServer,
  RpcServiceError,
  RpcUnavailableError,
  requestRpc,
  serveRpc,
  serveRpcs,
} from './rpc';
export { SealedValueError } from './sealed';
export type { BusTables } from './tables';
export { withTimeout } from './timeout';
