import { type BusTables, busMigrations, enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { defineRoute } from '@paygate/http';
import {
  countStreamMessages,
  createTestEnvironment,
  openSchema,
  spawnTsProcess,
  type TestEnvironment,
  waitFor,
} from '@paygate/testing';
import { sql } from 'kysely';
import request from 'supertest';
import { ConfigError, commonConfig, type RunningService, type ServiceContext, startService } from '../src';

interface FixtureDatabase extends BusTables {
  things: { id: string };
}

describe('startService: health, readiness, metrics, migrations in the service schema', () => {
  let env: TestEnvironment;
  let service: RunningService<FixtureDatabase>;

  beforeAll(async () => {
    env = await createTestEnvironment('runtime');
    service = await startService({
      name: 'registry',
      config: commonConfig(env.envFor('fixture'), { serviceName: 'fixture', schema: 'fixture', port: 0 }),
      logger: env.logger,
      migrations: {
        ...busMigrations,
        '2026-11-22-0100-things': {
          up: async (db) => {
            await db.schema
              .createTable('things')
              .addColumn('id', 'text', (c) => c.primaryKey())
              .execute();
          },
        },
      },
      build: (ctx: ServiceContext<FixtureDatabase>) => ({
        readinessChecks: [{ name: 'chain', check: async () => {} }, async () => {}],
        routes: [
          // Served on the bare request: it answers bodies it can read raw and leaves the rest to express.
          defineRoute({
            method: 'post',
            path: '/echo',
            summary: 'echo',
            responses: { '200': { description: 'the bytes sent' } },
            bare: {
              prefix: '/echo',
              handle: (req, res) => {
                if (req.headers['x-leave-to-express']) return false;
                req.pipe(res.writeHead(200, { 'x-served': 'bare' }));
                return true;
              },
            },
            handler: (req, res) => res.set('x-served', 'express').json(req.body),
          }),
          // Served on the bare request only: express never sees it.
          defineRoute({
            method: 'get',
            path: '/raw/*rest',
            summary: 'raw',
            responses: { '200': { description: 'the path' } },
            bare: {
              prefix: '/raw/',
              handle: (req, res) => {
                res.writeHead(200, { 'content-type': 'text/plain' }).end(req.url);
                return true;
              },
            },
          }),
          defineRoute({
            method: 'post',
            path: '/things',
            summary: 'adds a thing and its event',
            responses: { '201': { description: 'added' } },
            handler: async (_req, res) => {
              await ctx.inTransaction(async (trx) => {
                await trx.insertInto('things').values({ id: 'a' }).execute();
                await enqueueEvent(
                  trx,
                  createEvent('seller.updated', 'registry', {
                    sellerId: 'sel_a',
                    revision: 1,
                    walletAddress: `0x${'11'.repeat(20)}`,
                    payoutAddress: `0x${'11'.repeat(20)}`,
                    publishableKey: 'pk_test_x',
                    apiKeyVersion: 1,
                    webhookUrl: null,
                    webhookSecretVersion: 0,
                    settlementFrequency: 'DAILY',
                    minimumSettlement: '10',
                    updatedAt: new Date().toISOString(),
                  }),
                );
              });
              res.status(201).json({ ok: true });
            },
          }),
        ],
      }),
    });
  });

  afterAll(async () => {
    await service?.stop();
    await env?.cleanup();
  });

  it('serves /healthz, /readyz (Postgres and NATS) and /metrics', async () => {
    expect((await request(service.app).get('/healthz')).body).toEqual({ status: 'ok', service: 'registry' });
    const ready = await request(service.app).get('/readyz');
    expect(ready.status).toBe(200);
    // Extra checks are reported by their name (an operator sees "chain"), unnamed ones by their position.
    expect(ready.body.checks).toEqual({ postgres: 'ok', nats: 'ok', chain: 'ok', check_1: 'ok' });
    await request(service.app).get('/healthz');
    const metrics = await request(service.app).get('/metrics');
    expect(metrics.text).toContain('http_request_duration_seconds');
    expect(metrics.text).toContain('outbox_backlog');
    expect(metrics.text).toContain('process_cpu_seconds_total');
  });

  it('keeps kysely’s migration bookkeeping inside the service schema', async () => {
    const db = openSchema(env.schemaFor('fixture'));
    const tables = await sql<{ table_name: string }>`
      select table_name from information_schema.tables where table_schema = ${env.schemaFor('fixture')} order by 1`.execute(
      db,
    );
    expect(tables.rows.map((r) => r.table_name)).toEqual(
      expect.arrayContaining(['inbox', 'kysely_migration', 'kysely_migration_lock', 'outbox', 'things']),
    );
    const elsewhere =
      await sql`select 1 from information_schema.tables where table_schema = 'public' and table_name = 'kysely_migration'`.execute(
        db,
      );
    expect(elsewhere.rows).toHaveLength(0);
    await db.destroy();
  });

  it('publishes a committed change’s event through the outbox at once', async () => {
    await request(service.app).post('/things').expect(201);
    const bus = await env.bus();
    await waitFor(async () => (await countStreamMessages(bus, 'seller.updated')).length === 1);
  });

  it('offers a declared bare route each request of its prefix before express', async () => {
    const body = '{"a": 1,   "b": [2]}';
    const bare = await fetch(`${service.url}/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    // The bytes as sent: no JSON parser ran ahead of it.
    expect(bare.headers.get('x-served')).toBe('bare');
    expect(await bare.text()).toBe(body);
    const left = await fetch(`${service.url}/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-leave-to-express': '1' },
      body,
    });
    expect(left.headers.get('x-served')).toBe('express');
    expect(await left.json()).toEqual({ a: 1, b: [2] });
    const raw = await fetch(`${service.url}/raw/x?y=1`);
    expect(await raw.text()).toBe('/raw/x?y=1');
    // Not under the prefix: express's 404.
    expect((await fetch(`${service.url}/rawx`)).status).toBe(404);
    // Express does not serve a route that has only a bare handler.
    expect((await request(service.app).get('/raw/x')).status).toBe(404);
  });

  it('answers 404 in the shared error shape, never a stack trace', async () => {
    const response = await request(service.app).get('/nope');
    expect(response.status).toBe(404);
    expect(response.body.error).toMatchObject({ code: 'route_not_found' });
    const bad = await request(service.app)
      .post('/things')
      .set('content-type', 'application/json')
      .send('{oops');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'invalid_json', field: 'body' });
    expect(JSON.stringify(bad.body)).not.toContain(' at ');
    // Valid JSON that is not an object or array: the answer must not call it invalid JSON.
    const scalar = await request(service.app)
      .post('/things')
      .set('content-type', 'application/json')
      .send('null');
    expect(scalar.status).toBe(400);
    expect(scalar.body.error).toMatchObject({
      code: 'invalid_json',
      message: 'body must be a JSON object or array',
      rule: 'must be a JSON object or array',
    });
  });
});

describe('start-up without Postgres or NATS: one clear line per attempt, a bounded retry, no stack trace', () => {
  const fixture = 'libs/runtime/test/fixtures/main.ts';

  function jsonLines(output: string) {
    return output
      .split('\n')
      .filter((line) => line.trim())
      .map((line) => JSON.parse(line) as { level: string; msg: string });
  }

  it('retries Postgres a bounded number of times, then exits 1', async () => {
    const child = spawnTsProcess(fixture, {
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test',
      STARTUP_ATTEMPTS: '3',
      LOG_LEVEL: 'info',
    });
    expect(await child.exited).toBe(1);
    const lines = jsonLines(child.output());
    expect(lines.map((l) => l.level)).toEqual(['warn', 'warn', 'fatal']);
    expect(lines[0]!.msg).toMatch(
      /^cannot reach Postgres at 127\.0\.0\.1:1 \(ECONNREFUSED.*retrying in \d+ ms \(attempt 1\/3\)$/,
    );
    expect(lines[2]!.msg).toMatch(/gave up after 3 attempts/);
    expect(child.output()).not.toMatch(/\n\s+at /);
  });

  it('retries NATS the same way, naming the server without the password in its URL', async () => {
    const child = spawnTsProcess(fixture, {
      NATS_URL: 'nats://svc:hunter3@127.0.0.1:1',
      STARTUP_ATTEMPTS: '2',
      LOG_LEVEL: 'info',
    });
    expect(await child.exited).toBe(1);
    const lines = jsonLines(child.output());
    expect(lines.map((l) => l.level)).toEqual(['warn', 'fatal']);
    expect(lines[0]!.msg).toContain('cannot reach NATS at nats://svc:[redacted]@127.0.0.1:1');
    expect(child.output()).not.toContain('hunter3');
  });

  it('says why it did not start even when LOG_LEVEL silences every line, without the password', async () => {
    const child = spawnTsProcess(fixture, {
      DATABASE_URL: 'postgres://app:hunter2@db:54x2/paygate',
      LOG_LEVEL: 'silent',
    });
    expect(await child.exited).toBe(1);
    await waitFor(() => child.output().includes('\n'), { timeoutMs: 5000, message: 'a line on stderr' });
    expect(child.output()).toMatch(/^registry failed to start: invalid configuration: DATABASE_URL: /);
    expect(child.output()).toContain('postgres://app:[redacted]@db:54x2/paygate');
    expect(child.output()).not.toContain('hunter2');
  });

  it('refuses a bad configuration in one line naming the variable', () => {
    expect(() => commonConfig({ PORT: 'x' }, { serviceName: 's', schema: 's', port: 1 })).toThrow(
      ConfigError,
    );
    expect(() =>
      commonConfig({ DB_SCHEMA: 'Bad-Schema' }, { serviceName: 's', schema: 's', port: 1 }),
    ).toThrow(/DB_SCHEMA/);
  });
});
