/**
 * The notifier's errors, told apart by class, never by message text. Refusals answered over HTTP are
 * `HttpError`s (libs/http); the live socket's are its `ErrorCode`s (live/protocol.ts).
 */
export class NotifierError extends Error {
  override name = 'NotifierError';
}

/** A seller's webhook signing secret could not be had now (the registry did not answer in time): try later. */
export class SecretUnavailableError extends NotifierError {
  override name = 'SecretUnavailableError';
}

/** The registry answered that the seller has no webhook signing secret yet: nothing can be signed until one exists. */
export class NoWebhookSecretError extends SecretUnavailableError {
  override name = 'NoWebhookSecretError';
  constructor(readonly sellerId: string) {
    super('registry has no webhook secret for this seller');
  }
}
