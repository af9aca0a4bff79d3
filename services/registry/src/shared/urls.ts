import { badRequest } from '@paygate/http';
import { publicUrlProblem } from '@paygate/net';
import type { RegistryContext } from '../context';

/**
 * Checks a seller-supplied URL (apiBaseUrl, webhookUrl): absolute http(s), no credentials, query or fragment,
 * and in production https to a public address. Returns it without a trailing slash.
 */
export async function checkSellerUrl(
  rc: Pick<RegistryContext, 'config' | 'resolveHost'>,
  field: string,
  value: string,
): Promise<string> {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw badRequest(field, 'must be an absolute URL such as https://api.example.com');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw badRequest(field, 'must use http or https');
  if (url.username || url.password) throw badRequest(field, 'must not contain credentials');
  if (url.search || url.hash || value.includes('?') || value.includes('#'))
    throw badRequest(field, 'must not contain a query or fragment');
  if (rc.config.production) {
    const problem = await publicUrlProblem(url, rc.resolveHost);
    if (problem) throw badRequest(field, problem);
  }
  return url.toString().replace(/\/+$/, '');
}
