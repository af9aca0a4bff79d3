import http, {
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import https from 'node:https';

/** Never forwarded to a seller: hop-by-hop headers, the payment proof, tickets and any credentials. */
const DROPPED_REQUEST_HEADERS = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'x-402-payment',
  'payment',
  'x-402-ticket',
  'authorization',
  'cookie',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-real-ip',
]);
const DROPPED_RESPONSE_HEADERS = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

export interface ForwardTarget {
  clientIp: string;
  /** Raw bytes of a body already read (express.json); otherwise the request stream is piped. */
  rawBody?: Buffer;
  /** The seller's URL for this call: apiBaseUrl + endpoint path + query, as request options. */
  url: { protocol: string; hostname: string; port: string; path: string };
  /** Extra headers telling the seller who paid. */
  extraHeaders: Readonly<Record<string, string>>;
}

export type ForwardResult =
  | {
      kind: 'answered';
      status: number;
      /** Streams the seller's answer to the buyer, with extra response headers (the receipt). */
      relay(extraHeaders: Readonly<Record<string, string>>): void;
    }
  | { kind: 'failed'; reason: 'timeout' | 'unreachable'; message: string };

const agents = {
  http: new http.Agent({ keepAlive: true, maxSockets: 256 }),
  https: new https.Agent({ keepAlive: true, maxSockets: 256 }),
};

export function safeRequestHeaders(incoming: IncomingHttpHeaders): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  for (const name in incoming) {
    const value = incoming[name];
    if (value === undefined || DROPPED_REQUEST_HEADERS.has(name)) continue;
    headers[name] = value;
  }
  return headers;
}

/** Streams the seller's answer to the buyer: one writeHead (safe upstream headers + extra ones), then the body. */
function relayUpstream(
  upstreamRes: IncomingMessage,
  res: ServerResponse,
  status: number,
  extraHeaders: Readonly<Record<string, string>>,
): void {
  const headers: OutgoingHttpHeaders = {};
  const answered = upstreamRes.headers;
  for (const name in answered) {
    const value = answered[name];
    if (value !== undefined && !DROPPED_RESPONSE_HEADERS.has(name)) headers[name] = value;
  }
  for (const name in extraHeaders) headers[name] = extraHeaders[name];
  res.writeHead(status, headers);
  upstreamRes.on('error', () => res.destroy());
  upstreamRes.pipe(res);
}

/**
 * Sends the buyer's request to the seller. Calls `done` once: when the seller's response headers arrived
 * (the caller then decides, by status, what the payment becomes, and relays the body as a stream), or with
 * a failure on a connection error or when no response headers came within `timeoutMs`. No promise: the
 * hot path of a cached subscription stays synchronous up to the seller's answer.
 */
export function forwardRequestThen(
  req: IncomingMessage,
  res: ServerResponse,
  target: ForwardTarget,
  timeoutMs: number,
  done: (result: ForwardResult) => void,
): void {
  const isHttps = target.url.protocol === 'https:';
  const headers = safeRequestHeaders(req.headers);
  headers['x-forwarded-for'] = target.clientIp;
  headers['x-forwarded-proto'] =
    typeof req.headers['x-forwarded-proto'] === 'string' ? req.headers['x-forwarded-proto'] : 'http';
  if (req.headers.host) headers['x-forwarded-host'] = req.headers.host;
  const extraHeaders = target.extraHeaders;
  for (const name in extraHeaders) headers[name] = extraHeaders[name];
  // express.json may have consumed a JSON body; its raw bytes were kept, so send them as they came.
  const rawBody = target.rawBody;
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  if (rawBody) headers['content-length'] = String(rawBody.length);
  else if (hasBody && req.headers['content-length'])
    headers['content-length'] = req.headers['content-length'];
  else if (hasBody && req.headers['transfer-encoding']) headers['transfer-encoding'] = 'chunked';

  let settled = false;
  const upstream = (isHttps ? https : http).request(
    {
      protocol: target.url.protocol,
      hostname: target.url.hostname,
      port: target.url.port || undefined,
      path: target.url.path,
      method: req.method,
      headers,
      agent: isHttps ? agents.https : agents.http,
    },
    (upstreamRes: IncomingMessage) => {
      if (settled) {
        upstreamRes.resume();
        return;
      }
      settled = true;
      clearTimeout(timer);
      const status = upstreamRes.statusCode ?? 502;
      done({
        kind: 'answered',
        status,
        relay: (extra) => relayUpstream(upstreamRes, res, status, extra),
      });
    },
  );
  const timer = setTimeout(() => {
    upstream.destroy(new Error('timeout'));
    if (settled) return;
    settled = true;
    done({ kind: 'failed', reason: 'timeout', message: `the seller did not answer within ${timeoutMs} ms` });
  }, timeoutMs);
  upstream.on('error', (error) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    done({ kind: 'failed', reason: 'unreachable', message: `the seller's API failed: ${error.message}` });
  });
  if (rawBody) upstream.end(rawBody);
  else if (hasBody && !req.readableEnded) req.pipe(upstream);
  else upstream.end();
}

/** forwardRequestThen as a promise (the async paths). */
export function forwardRequest(
  req: IncomingMessage,
  res: ServerResponse,
  target: ForwardTarget,
  timeoutMs: number,
): Promise<ForwardResult> {
  return new Promise((resolve) => forwardRequestThen(req, res, target, timeoutMs, resolve));
}
