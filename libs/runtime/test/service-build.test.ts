import { type BusTables, busMigrations, consumersOf } from '@paygate/bus';
import { defineRoute } from '@paygate/http';
import { createTestEnvironment, type TestEnvironment } from '@paygate/testing';
import type { Migration } from 'kysely';
import request from 'supertest';
import {
  commonConfig,
  NotReadyError,
  type ServiceContext,
  startService,
  UndeclaredConsumerError,
} from '../src';

interface FixtureDatabase extends BusTables {
  things: { id: string };
}

const migrations: Record<string, Migration> = {
  ...busMigrations,
  '2026-12-02-0700-things': {
    up: async (db) => {
      await db.schema
        .createTable('things')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .execute();
    },
  },
};

describe('startService with build: the service constructed once, its parts mounted, started and stopped', () => {
  let env: TestEnvironment;

  beforeAll(async () => {
    env = await createTestEnvironment('runtime-build');
  });

  afterAll(async () => {
    await env?.cleanup();
  });

  const configFor = (schema: string) =>
    commonConfig(env.envFor('fixture'), { serviceName: 'fixture', schema, port: 0 });

  it('builds once, serves the routes and their OpenAPI document, and stops detach first, stop last', async () => {
    const happened: string[] = [];
    let builds = 0;
    let ownReady = true;
    const service = await startService({
      name: 'registry',
      config: configFor('fixture_build'),
      logger: env.logger,
      migrations,
      build(ctx: ServiceContext<FixtureDatabase>) {
        builds++;
        const routes = [
          defineRoute({
            method: 'post',
            path: '/things',
            summary: 'adds a thing',
            responses: { '201': { description: 'added' } },
            handler: async (_req, res) => {
              // Typed by the service's Database: no cast to reach its table.
              await ctx.inTransaction((trx) => trx.insertInto('things').values({ id: 'a' }).execute());
              res.status(201).json({ ok: true });
            },
          }),
        ];
        return {
          counter: { builds: () => builds },
          routes,
          openApi: { path: '/openapi.json', document: { title: 'fixture', description: 'fixture' } },
          tasks: [
            {
              start: () => void happened.push('task started'),
              stop: async () => void happened.push('task stopped'),
            },
          ],
          readinessChecks: [
            {
              name: 'own',
              check: async () => {
                if (!ownReady) throw new NotReadyError('the fixture is not ready');
              },
            },
          ],
          attach: () => void happened.push('attached'),
          detach: async () => void happened.push('detached'),
          stop: async () => void happened.push('stopped'),
        };
      },
    });
    try {
      expect(builds).toBe(1);
      expect(service.parts.counter.builds()).toBe(1);
      expect(happened).toEqual(['task started', 'attached']);
      expect((await request(service.app).post('/things')).status).toBe(201);
      expect(await service.ctx.db.selectFrom('things').select('id').execute()).toEqual([{ id: 'a' }]);
      const document = await request(service.app).get('/openapi.json');
      expect(document.status).toBe(200);
      expect(Object.keys(document.body.paths)).toContain('/things');
      const ready = await request(service.app).get('/readyz');
      expect(ready.body.checks).toEqual({ postgres: 'ok', nats: 'ok', own: 'ok' });
      // Not ready: the error envelope, every check's answer by name.
      ownReady = false;
      const notReady = await request(service.app).get('/readyz');
      expect(notReady.status).toBe(503);
      expect(notReady.body).toEqual({
        error: {
          code: 'not_ready',
          message: 'not ready: own',
          checks: { postgres: 'ok', nats: 'ok', own: 'the fixture is not ready' },
          requestId: notReady.headers['x-request-id'],
        },
      });
    } finally {
      await service.stop();
    }
    expect(happened).toEqual(['task started', 'attached', 'detached', 'task stopped', 'stopped']);
  });

  it('refuses an undeclared consumer and stops what build made', async () => {
    const happened: string[] = [];
    const consumer = consumersOf<FixtureDatabase>();
    const started = startService({
      name: 'registry',
      config: configFor('fixture_refused'),
      logger: env.logger,
      migrations,
      build: (_ctx: ServiceContext<FixtureDatabase>) => ({
        consumers: [
          consumer({
            durable: 'registry-undeclared',
            subject: 'skill.updated',
            handler: async (trx, event) => {
              await trx.insertInto('things').values({ id: event.data.skillId }).execute();
            },
          }),
        ],
        stop: async () => void happened.push('stopped'),
      }),
    });
    await expect(started).rejects.toThrow(UndeclaredConsumerError);
    expect(happened).toEqual(['stopped']);
  });
});
