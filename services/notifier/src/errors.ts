/** The registry did not give the seller's signing secret in time: try later. */
export class SecretUnavailableError extends Error {
  override name = 'SecretUnavailableError';
}

/** The seller has no webhook signing secret yet: nothing can be signed until one exists. */
export class NoWebhookSecretError extends SecretUnavailableError {
  override name = 'NoWebhookSecretError';
  constructor(readonly sellerId: string) {
    super('registry has no webhook secret for this seller');
  }
}
