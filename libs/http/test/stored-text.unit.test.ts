import type { Server } from 'node:http';
import { createLogger } from '@paygate/telemetry';
import { Type } from '@sinclair/typebox';
import type { Express } from 'express';
import { Pool } from 'pg';
import {
  assertValid,
  createApp,
  errorHandler,
  findStoredTextViolation,
  MAX_JSON_DEPTH,
  STORED_TEXT_RULES,
} from '../src';

const logger = createLogger('http-test', 'silent');
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function listen(app: Express): Promise<{ url: string; server: Server }> {
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const address = server.address();
  return { url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, server };
}

describe('the stored-text rules', () => {
  it('names the first field with NUL, an unpaired surrogate, an inexact number or too deep a nesting', () => {
    expect(findStoredTextViolation({ a: 'fine 💥', b: [1, 'x'] }, 'body')).toBeUndefined();
    expect(findStoredTextViolation({ skill: { displayName: 'a\u0000b' } }, 'body')).toEqual({
      field: 'skill.displayName',
      rule: STORED_TEXT_RULES.nul,
    });
    expect(findStoredTextViolation({ list: ['ok', 'x\ud800'] }, 'body')).toEqual({
      field: 'list.1',
      rule: STORED_TEXT_RULES.surrogate,
    });
    expect(findStoredTextViolation({ hours: 2 ** 64 }, 'body')).toEqual({
      field: 'hours',
      rule: STORED_TEXT_RULES.number,
    });
    expect(findStoredTextViolation({ 'k\u0000': 1 }, 'body')).toEqual({
      field: 'k\u0000',
      rule: `name ${STORED_TEXT_RULES.nul}`,
    });
    expect(findStoredTextViolation('\u0000', 'query')).toEqual({
      field: 'query',
      rule: STORED_TEXT_RULES.nul,
    });
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(findStoredTextViolation(deep, 'body')?.rule).toBe(STORED_TEXT_RULES.depth);
    let allowed: unknown = 'x';
    for (let i = 0; i < MAX_JSON_DEPTH; i++) allowed = { a: allowed };
    expect(findStoredTextViolation(allowed, 'body')).toBeUndefined();
  });

  it('are checked by assertValid before the schema, whatever the schema allows', () => {
    const schema = Type.Object({ description: Type.String({ maxLength: 500 }) });
    expect(() => assertValid(schema, { description: 'ok\u0000' })).toThrow(
      expect.objectContaining({
        status: 400,
        details: { field: 'description', rule: STORED_TEXT_RULES.nul },
      }),
    );
    expect(assertValid(schema, { description: 'ok' })).toEqual({ description: 'ok' });
  });
});

describe('createApp and errorHandler', () => {
  let server: Server;
  let url: string;
  let pool: Pool;
  beforeAll(async () => {
    pool = new Pool({ connectionString: DATABASE_URL, max: 2 });
    const app = createApp({ logger });
    // No validation on purpose: the body rules hold for every route.
    app.post('/echo', (req, res) => {
      res.json(req.body);
    });
    // What a handler does with a value the schema let through: Postgres refuses it.
    app.post('/store', async (req, res) => {
      const { rows } = await pool.query(`select $1::${req.body.type} as value`, [req.body.value]);
      res.json(rows[0]);
    });
    app.use(errorHandler(logger));
    ({ url, server } = await listen(app));
  });
  afterAll(async () => {
    await new Promise((r) => server?.close(r));
    await pool?.end();
  });

  const post = async (path: string, body: string) => {
    const response = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    return { status: response.status, body: (await response.json()) as { error?: Record<string, unknown> } };
  };

  it('refuses every JSON body breaking a stored-text rule with a 400 naming the field and the rule', async () => {
    expect(await post('/echo', '{"displayName":"ok"}')).toEqual({ status: 200, body: { displayName: 'ok' } });
    const nul = await post('/echo', '{"displayName":"a\\u0000b"}');
    expect(nul.status).toBe(400);
    expect(nul.body.error).toMatchObject({
      code: 'invalid_request',
      field: 'displayName',
      rule: STORED_TEXT_RULES.nul,
    });
    const surrogate = await post('/echo', '{"items":[{"name":"\\udc00"}]}');
    expect(surrogate.body.error).toMatchObject({ field: 'items.0.name', rule: STORED_TEXT_RULES.surrogate });
    const huge = await post('/echo', '{"holdPeriodHours":123456789012345678901234567890}');
    expect(huge.body.error).toMatchObject({ field: 'holdPeriodHours', rule: STORED_TEXT_RULES.number });
    const deep = await post('/echo', `${'['.repeat(100_000)}${']'.repeat(100_000)}`);
    expect(deep.status).toBe(400);
    expect(deep.body.error).toMatchObject({ rule: STORED_TEXT_RULES.depth });
  });

  it('answers a value Postgres refuses (SQLSTATE class 22) with a 400, never a 500', async () => {
    expect(await post('/store', '{"type":"int","value":"7"}')).toEqual({ status: 200, body: { value: 7 } });
    for (const value of ['99999999999', 'seven']) {
      const refused = await post('/store', JSON.stringify({ type: 'int', value }));
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({
        code: 'unstorable_value',
        rule: 'must be a value the database accepts',
      });
      expect(refused.body.error?.requestId).toEqual(expect.any(String));
    }
    expect((await post('/store', '{"type":"uuid","value":"not-a-uuid"}')).status).toBe(400);
    // Anything else stays a 500: a syntax error in the SQL is the server's fault.
    expect((await post('/store', '{"type":"no_such_type","value":"1"}')).status).toBe(500);
  });
});
