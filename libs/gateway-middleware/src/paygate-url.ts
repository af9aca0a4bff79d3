/** The address of the Paygate every middleware talks to, when the code did not pass one. */
const DEVELOPMENT_PAYGATE_URL = 'http://localhost:8080';

/** Given, else PAYGATE_BASE_URL; localhost only in development: production never sends its key there. */
export function resolvePaygateUrl(
  given: string | undefined,
  option: string,
  env: NodeJS.ProcessEnv = process.env,
): string {
  const url =
    given ?? env.PAYGATE_BASE_URL ?? (env.NODE_ENV === 'development' ? DEVELOPMENT_PAYGATE_URL : undefined);
  if (url === undefined || url.trim() === '') {
    throw new TypeError(
      `${option} is required: Paygate's address, e.g. https://paygate.example (or set PAYGATE_BASE_URL; ` +
        `${DEVELOPMENT_PAYGATE_URL} is assumed only when NODE_ENV=development)`,
    );
  }
  const protocol = URL.canParse(url) ? new URL(url).protocol : undefined;
  if (protocol !== 'https:' && protocol !== 'http:') {
    throw new TypeError(`${option} must be an http(s) URL, got "${url}"`);
  }
  return url.replace(/\/+$/, '');
}
