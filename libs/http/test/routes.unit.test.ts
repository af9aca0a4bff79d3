import type { Server } from 'node:http';
import { createLogger } from '@paygate/telemetry';
import { Type } from '@sinclair/typebox';
import request from 'supertest';
import {
  assertValid,
  createApp,
  defineRoute,
  errorHandler,
  HttpError,
  mountRoutes,
  notFound,
  openApiRoute,
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

  test('a path value that is not valid percent-encoding is a 400 naming the path and the rule', async () => {
    for (const path of ['/things/%zz', '/things/%E0%A4%A', '/things/%ff']) {
      const bad = await request(server).get(path);
      expect(bad.status).toBe(400);
      expect(bad.body.error).toMatchObject({
        code: 'invalid_request',
        field: 'path',
        rule: 'must be valid percent-encoded UTF-8',
      });
    }
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

describe('routes: readable pattern rules, optional bodies, wildcards and the document serving itself', () => {
  const Slug = Type.String({ pattern: '^[a-z]+(-[a-z]+)*$', 'x-rule': 'must be kebab-case' });
  const declared = [
    defineRoute({
      method: 'post',
      path: '/slugs/:slug/touch',
      operationId: 'touchSlug',
      summary: 'Touch a slug; the body may be left out',
      params: Type.Object({ slug: Type.String() }),
      body: Type.Object({ note: Type.Optional(Slug) }, { additionalProperties: false }),
      bodyOptional: true,
      responses: { '200': Type.Object({ note: Type.String() }) },
      handler: (req, res) => {
        res.json({ note: req.body.note ?? 'none' });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/pages/*rest',
      summary: 'Any page',
      params: Type.Object({ rest: Type.Array(Type.String()) }),
      responses: { '200': { description: 'a page', schema: { type: 'string' }, contentType: 'text/html' } },
      handler: (req, res) => {
        res.type('html').send(`<p>${req.params.rest.join('/')}</p>`);
      },
    }),
  ];
  const docRoute = openApiRoute('/openapi.json', { title: 'slugs', description: 'test' }, declared);
  const app = createApp({ logger: createLogger('routes-test', 'silent') });
  mountRoutes(app, [...declared, docRoute]);
  app.use(errorHandler(createLogger('routes-test', 'silent')));

  test('a pattern with x-rule is refused with that rule, the raw pattern otherwise', async () => {
    const refused = await request(app).post('/slugs/a/touch').send({ note: 'Not Kebab' });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ field: 'note', rule: 'must be kebab-case' });
    expect(refused.body.error.message).toBe('note must be kebab-case');
    // No body at all is the empty object.
    expect((await request(app).post('/slugs/a/touch')).body).toEqual({ note: 'none' });
    expect((await request(app).post('/slugs/a/touch').send({ note: 'a-b' })).body).toEqual({ note: 'a-b' });
    expect((await request(app).get('/pages/x/y')).text).toBe('<p>x/y</p>');
  });

  test('the served document lists every route, itself included, with operationId and optional body', async () => {
    const served = await request(app).get('/openapi.json');
    expect(served.status).toBe(200);
    expect(served.headers['access-control-allow-origin']).toBe('*');
    const document = served.body;
    expect(Object.keys(document.paths)).toEqual(['/slugs/{slug}/touch', '/pages/{rest}', '/openapi.json']);
    const touch = document.paths['/slugs/{slug}/touch'].post;
    expect(touch.operationId).toBe('touchSlug');
    expect(touch.requestBody.required).toBe(false);
    expect(touch.requestBody.content['application/json'].schema.properties.note['x-rule']).toBe(
      'must be kebab-case',
    );
    const page = document.paths['/pages/{rest}'].get;
    expect(page.parameters.map((p: any) => `${p.in}:${p.name}`)).toEqual(['path:rest']);
    expect(Object.keys(page.responses['200'].content)).toEqual(['text/html']);
    expect(document.paths['/openapi.json'].get.responses['200'].description).toBe('OpenAPI 3.1 document');
  });
});

describe('routes: optional auth, bodies the handler validates, rules per keyword', () => {
  const Body = Type.Object({ name: Type.String({ minLength: 1 }) }, { additionalProperties: false });
  const operatorOnly = operatorAuth('secret-token');
  const declared = [
    defineRoute({
      method: 'get',
      path: '/items/:code',
      summary: 'Public, or the operator’s view with the token',
      auth: {
        scheme: 'operatorToken',
        optional: true,
        middleware: (req, res, next) => (req.headers.authorization ? operatorOnly(req, res, next) : next()),
      },
      params: Type.Object({ code: Type.String() }),
      query: Type.Object({
        sort: Type.Optional(
          Type.String({
            pattern: '^(asc|desc)$',
            'x-rule': { pattern: 'must be asc or desc', type: 'must be given once, as a string' },
          }),
        ),
      }),
      responses: { '200': Type.Object({ code: Type.String(), operator: Type.Boolean() }) },
      handler: (req, res) => {
        res.json({ code: req.params.code, operator: Boolean(req.headers.authorization) });
      },
    }),
    defineRoute({
      method: 'post',
      path: '/items',
      summary: 'The handler checks the key, then the body',
      auth: { schemes: ['operatorToken'] },
      body: Body,
      bodyValidatedByHandler: true,
      responses: { '201': Type.Object({ name: Type.String() }) },
      handler: (req, res) => {
        if (req.headers.authorization !== 'Bearer secret-token')
          throw new HttpError(401, 'unauthorized', 'missing or invalid credentials');
        res.status(201).json(assertValid(Body, req.body ?? {}, 'body'));
      },
    }),
  ];
  const app = createApp({ logger: createLogger('routes-test', 'silent') });
  mountRoutes(app, declared);
  app.use(errorHandler(createLogger('routes-test', 'silent')));
  const document = routesOpenApi(
    {
      title: 'items',
      description: 'test',
      securitySchemes: { operatorToken: securitySchemes.operatorToken },
    },
    declared,
  ) as any;

  test('x-rule as an object names the rule per ajv keyword', async () => {
    expect((await request(app).get('/items/a?sort=up')).body.error).toMatchObject({
      field: 'sort',
      rule: 'must be asc or desc',
      message: 'sort must be asc or desc',
    });
    expect((await request(app).get('/items/a?sort=asc&sort=desc')).body.error).toMatchObject({
      field: 'sort',
      rule: 'must be given once, as a string',
    });
    expect((await request(app).get('/items/a?sort=asc')).status).toBe(200);
  });

  test('optional auth serves callers without credentials, checks those who bring some, and documents both', async () => {
    expect((await request(app).get('/items/a')).body).toEqual({ code: 'a', operator: false });
    expect((await request(app).get('/items/a').set('authorization', 'Bearer wrong')).status).toBe(401);
    expect(
      (await request(app).get('/items/a').set('authorization', 'Bearer secret-token')).body.operator,
    ).toBe(true);
    expect(document.paths['/items/{code}'].get.security).toEqual([{}, { operatorToken: [] }]);
  });

  test('a body the handler validates is left to it: the key is checked first, then the same schema', async () => {
    // mountRoutes would have answered 400 for the body before the handler saw the missing key.
    expect((await request(app).post('/items').send({ name: '' })).status).toBe(401);
    const invalid = await request(app)
      .post('/items')
      .set('authorization', 'Bearer secret-token')
      .send({ name: '' });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error).toMatchObject({ field: 'name', rule: 'must be at least 1 characters' });
    const post = document.paths['/items'].post;
    expect(post.security).toEqual([{ operatorToken: [] }]);
    expect(post.requestBody.content['application/json'].schema.required).toEqual(['name']);
  });
});
