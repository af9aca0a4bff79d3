export { type BackoffPolicy, backoffCeilingMs, backoffDelayMs } from './backoff';
export {
  anchorStreamStore,
  type Bus,
  type BusOptions,
  connectBus,
  deleteStreams,
  ensureStreams,
  natsServerList,
  STORE_ANCHOR_STREAM,
  streamNames,
} from './connection';
export {
  type BatchEventHandler,
  type ConsumerOptions,
  consumersOf,
  type DeclaredConsumer,
  defineConsumer,
  type EventHandler,
  encodeEnvelope,
  InboxConsumer,
} from './consumer';
export { listDeadLetters, replayDeadLetter } from './dead-letters';
export {
  BusConfigError,
  BusError,
  DeadLetterError,
  isConsumerExistsError,
  isJetStreamError,
  isTransientJetStreamError,
  JetStreamErrorCode,
  jetStreamErrorCode,
} from './errors';
export { inboxPrefixFor } from './inbox';
export {
  type ClaimedVia,
  LEDGER_CLAIM_TIMEOUT_MS,
  LedgerClaimClient,
  type LedgerClaimRefusal,
  type LedgerClaimRequest,
  type LedgerClaimResult,
} from './ledger-claims';
export { busMigrations, reorgTombstoneMigrations } from './migrations';
export { type AuthorizedNatsServer, findNatsServerBinary, startAuthorizedNatsServer } from './nats-server';
export { EventTooLargeError, enqueueEvent, MAX_EVENT_BYTES, OutboxRelay } from './outbox';
export {
  ADMIN_USER,
  busPermissions,
  generateNatsPasswords,
  type NatsPasswords,
  type NatsPermissions,
  renderNatsAuthorization,
  renderNatsServerConfig,
} from './permissions';
export { type PassOutcome, PolledTask, PollingLoop, type PollingLoopOptions } from './polling-loop';
export { type DurablePublishOptions, type DurablePublishResult, publishDurably } from './publish';
export {
  leaveReorgTombstone,
  lockTransferEvents,
  type TransferInclusion,
  takeReorgTombstone,
} from './reorg-tombstones';
export {
  REPLY_KEY_HEADER,
  type RpcClient,
  type RpcPrefix,
  type RpcServer,
  RpcServiceError,
  RpcUnavailableError,
  requestRpc,
  rpcClient,
  serveRpc,
  serveRpcs,
} from './rpc';
export { newReplyKey, openSealed, type ReplyKey, SealedValueError, sealTo } from './sealed';
export type { BusTables } from './tables';
