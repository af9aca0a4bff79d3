/**
 * The one public base URL in development (and in docker-compose): routes each path to the service that owns
 * it, from deploy/routes.json, the same table the k8s Ingress is generated from. WebSockets are proxied too.
 */
import http from 'node:http';
import httpProxy from 'http-proxy';
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

export function startEdge(options: EdgeOptions): Promise<http.Server> {
  const proxy = httpProxy.createProxyServer({
    // Appends the caller's address to X-Forwarded-For: the services trust the edge (TRUSTED_PROXIES, loopback
    // by default) and take the client address, which every rate limit counts, from that hop.
    xfwd: true,
    proxyTimeout: options.proxyTimeoutMs ?? 30_000,
    ws: true,
  });
  proxy.on('error', (_error, _req, res) => {
    if (res instanceof http.ServerResponse && !res.headersSent) {
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: { code: 'upstream_unavailable', message: 'the service for this path is not reachable' },
        }),
      );
    } else {
      (res as unknown as { destroy?: () => void }).destroy?.();
    }
  });
  const target = (url: string | undefined): string | undefined => {
    const pathname = new URL(url ?? '/', 'http://edge').pathname;
    for (const [prefix, upstream] of Object.entries(options.extraPrefixes ?? {})) {
      if (pathname === prefix.replace(/\/$/, '') || pathname.startsWith(prefix)) return upstream;
    }
    const service = routeFor(pathname);
    if (!service) return undefined;
    return options.upstreams?.[service] ?? upstreamFor(service, options.upstreamTemplate);
  };
  // Like the gateway: room for a 16 KiB x402 payment header beside the others (Node's default is 16 KiB in all).
  const server = http.createServer({ maxHeaderSize: 32 * 1024 }, (req, res) => {
    const upstream = target(req.url);
    if (!upstream) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'not_found', message: `no service serves ${req.url}` } }));
      return;
    }
    proxy.web(req, res, { target: upstream });
  });
  server.on('upgrade', (req, socket, head) => {
    const upstream = target(req.url);
    if (!upstream) return socket.destroy();
    proxy.ws(req, socket, head, { target: upstream });
  });
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
