import { createHmac } from 'node:crypto';

/** From the account's secret, id and version: nothing secret stored; a rotation leaves the others alone. */
export function endpointSecret(accountSecret: string, endpointId: string, version: number): string {
  const derived = createHmac('sha256', accountSecret)
    .update(`paygate-webhook-endpoint:${endpointId}:${version}`)
    .digest('base64url');
  return `whsec_${derived}`;
}
