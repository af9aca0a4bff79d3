import { createHmac } from 'node:crypto';

/**
 * An endpoint's signing secret, derived from the account's webhook secret (held by the registry) and the
 * endpoint's id and secret version: nothing secret is stored by the notifier, each endpoint verifies with its
 * own secret, and rotating one endpoint (a new version) leaves the others alone. Rotating the account's secret
 * changes every endpoint's (their new secrets are shown by rotating each endpoint).
 */
export function endpointSecret(accountSecret: string, endpointId: string, version: number): string {
  const derived = createHmac('sha256', accountSecret)
    .update(`paygate-webhook-endpoint:${endpointId}:${version}`)
    .digest('base64url');
  return `whsec_${derived}`;
}
