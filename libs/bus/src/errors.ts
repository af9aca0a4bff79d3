/** The bus's errors share one base, with a named subclass per situation; NATS's own are matched by code. */
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

/** JetStream API error codes (`err_code`), matched by number: servers reword the text between versions. */
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

/** What `request` answers, or `fallback` when it fails with one of the JetStream error `codes`. */
export function unlessJetStreamError<T, F>(
  request: Promise<T>,
  fallback: F,
  ...codes: number[]
): Promise<T | F> {
  return request.catch((error) => {
    if (isJetStreamError(error, ...codes)) return fallback;
    throw error;
  });
}

/** No answer in time or no responder (a leader election): worth asking again, unlike a refusal. */
export function isTransientJetStreamError(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === 'TIMEOUT' || code === '503';
}
