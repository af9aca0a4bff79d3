import type { SellerFetch } from '@paygate/net';

const MAX_LATENCY_MS = 5000;

/** The statuses that count as "the endpoint responds to HEAD" for a GET endpoint, as said in statusReason. */
export const PASSING_HEAD_STATUSES = '2xx, 400, 401, 402, 403 or 422';
/** ... and for an endpoint of any other method. */
export const PASSING_HEAD_STATUSES_NOT_GET =
  'any status below 500 for a POST, PUT, PATCH or DELETE endpoint: frameworks route HEAD to GET handlers only';

interface HeadProbeOptions {
  /** The endpoint's method: HEAD is answered by a GET handler only, so for any other method the status says less. */
  method?: string;
  /** The path has :param segments (probed as written). */
  pathHasParameters?: boolean;
}

/**
 * Why a HEAD status does not show the endpoint there (undefined when it does). HEAD reaches GET handlers only, so
 * for other methods any status below 500 passes (docs/api.md, "Validation and health pings").
 */
function headStatusProblem(status: number, options: HeadProbeOptions = {}): string | undefined {
  const isGet = (options.method ?? 'GET').toUpperCase() === 'GET';
  if (!isGet) {
    if (status < 500) return undefined;
    return `answered HTTP ${status}: the seller's server failed (passing: ${PASSING_HEAD_STATUSES_NOT_GET})`;
  }
  if (status >= 200 && status < 300) return undefined;
  if ([400, 401, 402, 403, 422].includes(status)) return undefined;
  // A path with :param segments is probed with the pattern itself (/users/:id): its route may well be there and
  // answer 404 for that value (no user ":id"), so 404 shows nothing wrong.
  if (status === 404 && options.pathHasParameters) return undefined;
  let why: string;
  if (status >= 300 && status < 400)
    why = 'a redirect (not followed: set apiBaseUrl and the path to where the endpoint is served)';
  else if (status === 404 || status === 410) why = 'nothing is served at this URL';
  else if (status === 405) why = 'the endpoint does not answer HEAD';
  else if (status >= 500) why = "the seller's server failed";
  else why = 'not a status that shows the endpoint is served here';
  return `answered HTTP ${status}: ${why} (passing: ${PASSING_HEAD_STATUSES})`;
}

/** What went wrong in a fetch that got no answer, for statusReason. */
function unreachableCause(error: unknown, timeoutMs: number): string {
  const name = (error as Error).name;
  if (name === 'TimeoutError' || name === 'AbortError') return `no answer within ${timeoutMs} ms`;
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  // The production address rule explains itself; other causes are best named by their code.
  if (cause?.code === 'ERR_FORBIDDEN_ADDRESS') return cause.message!;
  return `unreachable (${cause?.code ?? cause?.message ?? (error as Error).message})`;
}

/** HEAD apiBaseUrl + path: ok on a passing status under MAX_LATENCY_MS; redirects are not followed. */
export async function probeEndpoint(
  sellers: SellerFetch,
  url: string,
  timeoutMs: number,
  options: HeadProbeOptions = {},
): Promise<{ ok: boolean; latencyMs: number; cause?: string }> {
  const started = performance.now();
  try {
    const response = await sellers.fetch(url, {
      method: 'HEAD',
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    await response.body?.cancel().catch(() => undefined);
    const latencyMs = Math.round(performance.now() - started);
    const problem = headStatusProblem(response.status, options);
    if (problem) return { ok: false, latencyMs, cause: problem };
    if (latencyMs >= MAX_LATENCY_MS)
      return { ok: false, latencyMs, cause: `latency ${latencyMs} ms is not under ${MAX_LATENCY_MS} ms` };
    return { ok: true, latencyMs };
  } catch (error) {
    return {
      ok: false,
      latencyMs: Math.round(performance.now() - started),
      cause: unreachableCause(error, timeoutMs),
    };
  }
}
