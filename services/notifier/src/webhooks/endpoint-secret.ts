import { createHmac } from 'node:crypto';

/**
 * An endpoint's secret, derived from the account's (held by the registry), its id and version: the notifier stores
 * nothing secret, and rotating one endpoint leaves the others alone.
 */
export function endpointSecret(accountSecret: string, endpointId: string, version: number): string {
  const derived = createHmac('sha256', accountSecret)
    .update(`paygate-webhook-endpoint:${endpointId}:${version}`)
    .digest('base64url');
  return `whsec_${derived}`;
}
