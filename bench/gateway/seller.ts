/**
 * The benchmark's seller, in its own process: a bare node:http upstream (cases a-c) and an express app whose
 * /bare/data is unprotected and /tickets/data sits behind the ticket-verifying middleware (case d).
 * Prints "READY <json>" once both listen.
 */
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createGateway } from '@paygate/gateway-middleware';
import type ExpressModule from 'express';

// bench/ is not a workspace package: borrow express from the middleware's dev dependencies.
const express = createRequire(path.join(__dirname, '../../libs/gateway-middleware/package.json'))(
  'express',
) as typeof ExpressModule;

const payload = JSON.stringify({ forecast: 'sunny', temperatureC: 21, city: 'Paris' });

async function main() {
  const upstream = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
    res.end(payload);
  });
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));

  const gateway = createGateway({
    apiKey: 'sk_bench_seller_key_000000000000',
    apiBaseUrl: process.env.PAYGATE_URL ?? 'http://127.0.0.1:8082',
  });
  const app = express();
  app.disable('x-powered-by');
  const answer = (_req: ExpressModule.Request, res: ExpressModule.Response) => {
    res.type('application/json').send(payload);
  };
  app.get('/bare/data', answer);
  app.get('/tickets/data', gateway.ticket({ skill: 'bench-tix', basePath: '/tickets' }), answer);
  const sellerApp = await new Promise<http.Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  sellerApp.keepAliveTimeout = 60_000;
  const port = (s: http.Server) => (s.address() as AddressInfo).port;
  process.stdout.write(
    `READY ${JSON.stringify({ upstream: `http://127.0.0.1:${port(upstream)}`, app: `http://127.0.0.1:${port(sellerApp)}` })}\n`,
  );
  process.stdin.on('end', () => process.exit(0)); // the bench died: go too
  process.stdin.resume();
}

void main();
