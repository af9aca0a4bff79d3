import type { Server } from 'node:http';
import { createLogger } from '@paygate/telemetry';
import { Type } from '@sinclair/typebox';
import request from 'supertest';
import {
  createApp,
  defineRoute,
  errorHandler,
  mountRoutes,
  notFound,
  operatorAuth,
  routesOpenApi,
  securitySchemes,
} from '../src';

const Thing = Type.Object({ id: Type.String(), size: Type.Integer() }, { description: 'a thing' });
const things = new Map<string, { id: string; size: number }>([['a', { id: 'a', size: 1 }]]);

const routes = [
  defineRoute({
    method: 'get',
    path: '/things/:id',
    summary: 'One thing',
    params: Type.Object({ id: Type.String({ pattern: '^[a-z]{1,8}$' }) }),
    query: Type.Object({ scale: Type.Optional(Type.Integer({ minimum: 1, maximum: 10 })) }),
    responses: { '200': Thing },
    errors: { '404': 'no such thing' },
    handler: (req, res) => {
      const thing = things.get(req.params.id);
      if (!thing) throw notFound('thing');
      // The query arrives coerced: `?scale=3` is the number 3 here.
      res.json({ ...thing, size: thing.size * (req.query.scale ?? 1) });
    },
  }),
  defineRoute({
    method: 'post',
    path: '/things',
    summary: 'Create a thing',
    auth: { scheme: 'operatorToken', middleware: operatorAuth('secret-token') },
    body: Type.Object({
      id: Type.String({ minLength: 1, maxLength: 8 }),
      size: Type.Integer({ minimum: 0 }),
    }),
    responses: { '201': Thing },
    handler: (req, res) => {
      things.set(req.body.id, req.body);
      res.status(201).json(req.body);
    },
  }),
];

describe('routes declared once: express registration, validation and the OpenAPI document from one definition', () => {
  const app = createApp({ logger: createLogger('routes-test', 'silent') });
  mountRoutes(app, routes);
  app.use(errorHandler(createLogger('routes-test', 'silent')));
  let server: Server;
  beforeAll(async () => {
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  test('params and query are validated (with string coercion) before the handler', async () => {
    expect((await request(server).get('/things/a?scale=3')).body).toEqual({ id: 'a', size: 3 });
    const badQuery = await request(server).get('/things/a?scale=11');
    expect(badQuery.status).toBe(400);
    expect(badQuery.body.error).toMatchObject({ field: 'scale', rule: 'must be <= 10' });
    const badParam = await request(server).get('/things/ABC');
    expect(badParam.status).toBe(400);
    expect(badParam.body.error.field).toBe('id');
    expect((await request(server).get('/things/zz')).status).toBe(404);
  });

  test('auth runs first, then the body schema', async () => {
    expect((await request(server).post('/things').send({ id: 'b', size: 2 })).status).toBe(401);
    const invalid = await request(server)
      .post('/things')
      .set('authorization', 'Bearer secret-token')
      .send({ id: 'b', size: -1 });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error).toMatchObject({ field: 'size', rule: 'must be >= 0' });
    const created = await request(server)
      .post('/things')
      .set('authorization', 'Bearer secret-token')
      .send({ id: 'b', size: 2 });
    expect(created.status).toBe(201);
  });

  test('the document describes exactly the mounted routes, with their schemas, auth and errors', () => {
    const document = routesOpenApi(
      {
        title: 'things',
        description: 'test',
        securitySchemes: { operatorToken: securitySchemes.operatorToken },
      },
      routes,
    );
    expect(Object.keys(document.paths)).toEqual(['/things/{id}', '/things']);
    const get = (document.paths['/things/{id}'] as any).get;
    expect(get.parameters.map((p: any) => `${p.in}:${p.name}:${p.required}`)).toEqual([
      'path:id:true',
      'query:scale:false',
    ]);
    expect(Object.keys(get.responses).sort()).toEqual(['200', '400', '404']);
    expect(get.responses['200'].content['application/json'].schema.properties.size.type).toBe('integer');
    const post = (document.paths['/things'] as any).post;
    expect(post.security).toEqual([{ operatorToken: [] }]);
    expect(post.requestBody.content['application/json'].schema.required).toEqual(['id', 'size']);
    expect(Object.keys(post.responses).sort()).toEqual(['201', '400', '401']);
  });
});
