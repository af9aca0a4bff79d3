/**
 * The one public base URL in development (and in docker-compose): routes each path to the service that owns
 * it, from deploy/routes.json, the same table the k8s Ingress is generated from. WebSockets are proxied too.
 * Forwarding is Node's own http client (keep-alive), streamed both ways: no proxy library (http-proxy is no
 * longer maintained).
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
// errors.ts alone (it imports nothing): the edge answers with the services' envelope without loading their app code.
import { errorBody, HttpError, HttpReason } from '../../libs/http/src/errors';
import routeTable from '../routes.json';

export interface EdgeRoute {
  match: 'exact' | 'prefix' | 'regex';
  path: string;
  service: string;
}

export interface EdgeOptions {
  port: number;
  /** Upstream URL per service, e.g. `http://127.0.0.1:{port}` or `http://{service}:{port}`. */
  upstreamTemplate?: string;
  /** Exact upstream URLs by service name, over the template (tests run services on random ports). */
  upstreams?: Record<string, string>;
  /** Extra routes ahead of the table (the dev demo seller), mapped straight to a URL. */
  extraPrefixes?: Record<string, string>;
  /** Timeout for an upstream answer. */
  proxyTimeoutMs?: number;
}

const routes = routeTable.routes as EdgeRoute[];
const compiled = routes.map((route) => ({
  ...route,
  regex: route.match === 'regex' ? new RegExp(route.path) : null,
}));

/** The service owning a path: the first matching route of the table. */
export function routeFor(pathname: string): string | undefined {
  for (const route of compiled) {
    if (route.match === 'exact' && pathname === route.path) return route.service;
    if (route.match === 'prefix' && pathname.startsWith(route.path)) return route.service;
    if (route.match === 'regex' && route.regex!.test(pathname)) return route.service;
  }
  return undefined;
}

export function upstreamFor(service: string, template = 'http://127.0.0.1:{port}'): string {
  const port = (routeTable.services as Record<string, { port: number }>)[service]?.port;
  if (!port) throw new Error(`no port for service ${service} in routes.json`);
  return template.replace('{service}', service).replace('{port}', String(port));
}

/** Headers of one connection, never forwarded (RFC 9110 §7.6.1); `upgrade` is set again for a WebSocket. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * The request's headers for the upstream: hop-by-hop ones dropped, and the caller's address appended to
 * X-Forwarded-For (the services trust the edge, TRUSTED_PROXIES loopback by default, and take the client address,
 * which every rate limit counts, from that hop), with X-Forwarded-Host and -Proto.
 */
function forwardedHeaders(req: http.IncomingMessage): http.OutgoingHttpHeaders {
  const headers: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
  }
  // An IPv4 peer of a dual-stack socket reads ::ffff:a.b.c.d.
  const client = (req.socket.remoteAddress ?? '').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
  const prior = req.headers['x-forwarded-for'];
  headers['x-forwarded-for'] = prior
    ? `${Array.isArray(prior) ? prior.join(', ') : prior}, ${client}`
    : client;
  headers['x-forwarded-host'] ??= req.headers.host ?? '';
  headers['x-forwarded-proto'] ??= 'http';
  return headers;
}

/** The edge's own answers (no route, the service away or silent): libs/http's envelope, as every service answers. */
function answerError(res: http.ServerResponse, status: number, code: string, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
  res.end(JSON.stringify(errorBody(new HttpError(status, code, message))));
}

/** The raw head of an HTTP/1.1 answer, for a socket that left the HTTP parser (an upgrade). */
function responseHead(status: number, message: string, headers: http.IncomingHttpHeaders): string {
  const lines = [`HTTP/1.1 ${status} ${message}`];
  for (const [name, value] of Object.entries(headers)) {
    for (const v of Array.isArray(value) ? value : [value ?? '']) lines.push(`${name}: ${v}`);
  }
  return `${lines.join('\r\n')}\r\n\r\n`;
}

export function startEdge(options: EdgeOptions): Promise<http.Server> {
  const timeoutMs = options.proxyTimeoutMs ?? 30_000;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const target = (url: string | undefined): URL | undefined => {
    const pathname = new URL(url ?? '/', 'http://edge').pathname;
    for (const [prefix, upstream] of Object.entries(options.extraPrefixes ?? {})) {
      if (pathname === prefix.replace(/\/$/, '') || pathname.startsWith(prefix)) return new URL(upstream);
    }
    const service = routeFor(pathname);
    if (!service) return undefined;
    return new URL(options.upstreams?.[service] ?? upstreamFor(service, options.upstreamTemplate));
  };
  const upstreamRequest = (req: http.IncomingMessage, upstream: URL, headers: http.OutgoingHttpHeaders) =>
    http.request({
      protocol: upstream.protocol,
      hostname: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers,
      agent: headers.upgrade ? false : agent,
      timeout: timeoutMs,
    });

  // Like the gateway: room for a 16 KiB x402 payment header beside the others (Node's default is 16 KiB in all).
  const server = http.createServer({ maxHeaderSize: 32 * 1024 }, (req, res) => {
    const upstream = target(req.url);
    if (!upstream) {
      answerError(res, 404, HttpReason.RouteNotFound, `no service serves ${req.url}`);
      return;
    }
    const outgoing = upstreamRequest(req, upstream, forwardedHeaders(req));
    outgoing.on('response', (answer) => {
      const headers: http.OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(answer.headers)) {
        if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
      }
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, headers);
      answer.pipe(res);
      answer.once('error', () => res.destroy());
    });
    outgoing.once('timeout', () => outgoing.destroy(new Error('upstream timeout')));
    outgoing.once('error', (error) => {
      if (error.message === 'upstream timeout') {
        answerError(res, 504, 'upstream_timeout', `the service did not answer within ${timeoutMs} ms`);
      } else {
        answerError(res, 502, 'upstream_unavailable', 'the service for this path is not reachable');
      }
    });
    // The caller went away: so does the upstream request.
    res.once('close', () => {
      if (!res.writableFinished) outgoing.destroy();
    });
    req.pipe(outgoing);
  });

  server.on('upgrade', (req, socket: Duplex, head: Buffer) => {
    const upstream = target(req.url);
    if (!upstream) {
      socket.destroy();
      return;
    }
    socket.on('error', () => socket.destroy());
    const headers = forwardedHeaders(req);
    headers.connection = 'Upgrade';
    headers.upgrade = req.headers.upgrade ?? 'websocket';
    const outgoing = upstreamRequest(req, upstream, headers);
    outgoing.setTimeout(0);
    outgoing.once('upgrade', (answer, upstreamSocket, upstreamHead) => {
      socket.write(responseHead(101, answer.statusMessage ?? 'Switching Protocols', answer.headers));
      if (upstreamHead.length) socket.write(upstreamHead);
      if (head.length) upstreamSocket.write(head);
      upstreamSocket.on('error', () => socket.destroy());
      socket.once('close', () => upstreamSocket.destroy());
      upstreamSocket.once('close', () => socket.destroy());
      upstreamSocket.pipe(socket).pipe(upstreamSocket);
    });
    // The upstream refused the upgrade: its answer goes back as is.
    outgoing.once('response', (answer) => {
      socket.write(responseHead(answer.statusCode ?? 502, answer.statusMessage ?? '', answer.headers));
      answer.pipe(socket);
    });
    outgoing.once('error', () => socket.destroy());
    outgoing.end();
  });
  // As the services do (libs/runtime): idle client connections outlive the clients' own idle sockets, so a request
  // never goes out on a socket the edge is closing at that moment.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.once('close', () => agent.destroy());
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, '0.0.0.0', () => resolve(server));
  });
}

if (require.main === module) {
  const port = Number(process.env.PORT ?? 8080);
  startEdge({ port, upstreamTemplate: process.env.EDGE_UPSTREAM_TEMPLATE }).then(
    () => console.log(JSON.stringify({ level: 'info', service: 'edge', msg: `edge listening on ${port}` })),
    (error) => {
      console.error(`edge failed to start: ${(error as Error).message}`);
      process.exit(1);
    },
  );
}
