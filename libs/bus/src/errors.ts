/**
 * The bus's errors share one base, `BusError`, with a named subclass per situation (`RpcUnavailableError`,
 * `RpcServiceError`, `EventTooLargeError`, `SealedValueError`, the two below); NATS's own are matched by code.
 */
export class BusError extends Error {
  override name = 'BusError';
}

/** NATS_URL or EVENT_NAMESPACE cannot be used as given. */
export class BusConfigError extends BusError {
  override name = 'BusConfigError';
}

/** A parked event cannot be replayed as it is (it names no original subject). */
export class DeadLetterError extends BusError {
  override name = 'DeadLetterError';
}

/**
 * JetStream API error codes (nats-server's `err_code`), matched by number, never by message text, which
 * servers reword between versions.
 */
export const JetStreamErrorCode = {
  ConsumerNotFound: 10014,
  ConsumerNameInUse: 10013,
  ConsumerAlreadyExists: 10105,
  ConsumerExists: 10148,
  StreamNameInUse: 10058,
  StreamNotFound: 10059,
  WrongLastSequence: 10071,
} as const;

/** The JetStream API error code an error carries (nats.js sets `api_error` on API failures), if any. */
export function jetStreamErrorCode(error: unknown): number | undefined {
  return (error as { api_error?: { err_code?: number } } | undefined)?.api_error?.err_code;
}

export function isJetStreamError(error: unknown, ...codes: number[]): boolean {
  const code = jetStreamErrorCode(error);
  return code !== undefined && codes.includes(code);
}

/** The consumer add failed because a consumer of that name exists (created by another replica meanwhile). */
export const isConsumerExistsError = (error: unknown) =>
  isJetStreamError(
    error,
    JetStreamErrorCode.ConsumerNameInUse,
    JetStreamErrorCode.ConsumerAlreadyExists,
    JetStreamErrorCode.ConsumerExists,
  );

/**
 * A JetStream API request that got no answer in time or found no responder: the server is electing a leader or is
 * overloaded (a chaos run's new 3-node cluster timed out a consumer lookup at start-up). Worth asking again; a
 * refusal (a bad configuration, a permission) is not.
 */
export function isTransientJetStreamError(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === 'TIMEOUT' || code === '503';
}
