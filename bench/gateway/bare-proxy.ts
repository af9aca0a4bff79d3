/** Case (b): a bare http-proxy reverse proxy in front of the seller's upstream, in its own process. */
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

const requireFromGateway = createRequire(path.join(__dirname, '../../services/gateway-proxy/package.json'));
const httpProxy = requireFromGateway('http-proxy') as {
  createProxyServer(options: Record<string, unknown>): {
    web(
      req: http.IncomingMessage,
      res: http.ServerResponse,
      options: Record<string, unknown>,
      onError: (e: Error) => void,
    ): void;
  };
};

const target = process.env.UPSTREAM_URL!;
const proxy = httpProxy.createProxyServer({ agent: new http.Agent({ keepAlive: true, maxSockets: 256 }) });
const server = http.createServer((req, res) => {
  proxy.web(req, res, { target }, () => {
    res.writeHead(502);
    res.end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(
    `READY ${JSON.stringify({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })}\n`,
  );
});
process.stdin.on('end', () => process.exit(0));
process.once('SIGTERM', () => process.exit(0)); // exits normally, so BENCH_PROFILE's profile is written
process.stdin.resume();
