/** Told apart by class; HTTP refusals are `HttpError`s, the socket's its `ErrorCode`s (live/protocol.ts). */
export class NotifierError extends Error {
  override name = 'NotifierError';
}

/** The registry did not give the seller's signing secret in time: try later. */
export class SecretUnavailableError extends NotifierError {
  override name = 'SecretUnavailableError';
}

/** The seller has no webhook signing secret yet: nothing can be signed until one exists. */
export class NoWebhookSecretError extends SecretUnavailableError {
  override name = 'NoWebhookSecretError';
  constructor(readonly sellerId: string) {
    super('registry has no webhook secret for this seller');
  }
}
