import type { Server } from 'node:http';
import { createLogger } from '@paygate/telemetry';
import { Type } from '@sinclair/typebox';
import type { Express } from 'express';
import {
  constantTimeEqual,
  createApp,
  ErrorBodySchema,
  errorHandler,
  errorResponses,
  jsonRequestBody,
  jsonResponse,
  openApiDocument,
  operatorAuth,
  schemaParameters,
  securitySchemes,
} from '../src';

const logger = createLogger('http-test', 'silent');

async function listen(app: Express): Promise<{ url: string; server: Server }> {
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const address = server.address();
  return { url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, server };
}

describe('operatorAuth', () => {
  let server: Server;
  let url: string;
  beforeAll(async () => {
    const app = createApp({ logger });
    app.get('/op', operatorAuth('the-operator-token-0123456789'), (_req, res) => {
      res.json({ ok: true });
    });
    app.get('/closed', operatorAuth(''), (_req, res) => {
      res.json({ ok: true });
    });
    app.use(errorHandler(logger));
    ({ server, url } = await listen(app));
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('lets the right token through', async () => {
    const res = await fetch(`${url}/op`, {
      headers: { authorization: 'Bearer the-operator-token-0123456789' },
    });
    expect(res.status).toBe(200);
  });

  it.each([
    ['no header', {}],
    ['a wrong token', { authorization: 'Bearer the-operator-token-012345678X' }],
    ['a prefix of the token', { authorization: 'Bearer the-operator' }],
    ['another scheme', { authorization: 'Basic the-operator-token-0123456789' }],
  ])('answers 401 with the shared body for %s', async (_what, headers) => {
    const res = await fetch(`${url}/op`, { headers });
    expect(res.status).toBe(401);
    const body = (await res.json()) as any;
    expect(body.error).toMatchObject({
      code: 'unauthorized',
      message: 'operator token required (Authorization: Bearer <OPERATOR_TOKEN>)',
      field: 'Authorization',
      rule: 'must be the operator token',
    });
    expect(typeof body.error.requestId).toBe('string');
  });

  it('an empty configured token lets nobody in', async () => {
    expect((await fetch(`${url}/closed`)).status).toBe(401);
    expect((await fetch(`${url}/closed`, { headers: { authorization: 'Bearer ' } })).status).toBe(401);
  });

  it('constantTimeEqual compares strings of any length', () => {
    expect(constantTimeEqual('abc', 'abc')).toBe(true);
    expect(constantTimeEqual('abc', 'abcd')).toBe(false);
    expect(constantTimeEqual('', '')).toBe(true);
  });
});

describe('OpenAPI helpers', () => {
  const Body = Type.Object({
    amount: Type.String({ description: 'USDC' }),
    note: Type.Optional(Type.String()),
  });

  it('openApiDocument builds a 3.1 document with the shared Error schema and plain JSON schemas', () => {
    const doc = openApiDocument({
      title: 'Test',
      description: 'a test API',
      serverUrl: 'https://paygate.example',
      securitySchemes: { apiKey: securitySchemes.apiKey },
      schemas: { Body },
      paths: {
        '/x': { post: { requestBody: jsonRequestBody(Body), responses: errorResponses({ '400': 'bad' }) } },
      },
    });
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info).toEqual({ title: 'Test', version: '1.0.0', description: 'a test API' });
    expect(doc.servers).toEqual([{ url: 'https://paygate.example' }]);
    expect(doc.components.securitySchemes).toEqual({ apiKey: securitySchemes.apiKey });
    expect(Object.keys(doc.components.schemas)).toEqual(['Body', 'Error']);
    expect(doc.components.schemas.Error).toEqual(JSON.parse(JSON.stringify(ErrorBodySchema)));
    // TypeBox's symbol keys are gone: the document is plain JSON.
    expect(Object.getOwnPropertySymbols(doc.components.schemas.Body)).toHaveLength(0);
    const op = (doc.paths['/x'] as any).post;
    expect(op.requestBody).toEqual({
      required: true,
      content: { 'application/json': { schema: JSON.parse(JSON.stringify(Body)) } },
    });
    expect(op.responses['400'].content['application/json'].schema.properties.error.required).toEqual(
      expect.arrayContaining(['code', 'message', 'requestId']),
    );
  });

  it('jsonResponse, jsonRequestBody examples and schemaParameters', () => {
    expect(jsonResponse(Body, 'ok').description).toBe('ok');
    expect(jsonRequestBody(Body, { required: false, examples: { a: { amount: '1' } } })).toMatchObject({
      required: false,
      content: { 'application/json': { examples: { a: { value: { amount: '1' } } } } },
    });
    expect(schemaParameters('query', Body)).toEqual([
      {
        name: 'amount',
        in: 'query',
        required: true,
        description: 'USDC',
        schema: { type: 'string', description: 'USDC' },
      },
      { name: 'note', in: 'query', required: false, schema: { type: 'string' } },
    ]);
    expect(schemaParameters('path', Body).every((p) => p.required)).toBe(true);
  });
});
