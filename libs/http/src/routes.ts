import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Static, TObject, TSchema } from '@sinclair/typebox';
import type { Express, NextFunction, Request, RequestHandler, Response } from 'express';
import {
  errorResponses,
  type JsonSchemaObject,
  jsonRequestBody,
  jsonResponse,
  type OpenApiDocumentOptions,
  openApiDocument,
  plainSchema,
  schemaParameters,
} from './openapi';
import { assertValid } from './validation';

type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete' | 'head';

/** How a route authenticates: the OpenAPI security scheme it documents and the middleware that enforces it. */
interface RouteAuth {
  /** Name of a security scheme of the document (`apiKey`, `publishableKey`, `operatorToken`…). */
  scheme: string;
  middleware: RequestHandler;
}

/** A response: a JSON body schema, or a description with an optional schema and content type. */
type RouteResponse = TSchema | DescribedResponse;

interface DescribedResponse {
  description: string;
  schema?: TSchema | JsonSchemaObject;
  contentType?: string;
  headers?: JsonSchemaObject;
}

/** Answers a request on the bare node request and returns true, or returns false to leave it to express. */
type BareHandler = (req: IncomingMessage, res: ServerResponse) => boolean;

/**
 * A route served on the bare node request for URLs starting with `prefix`, ahead of express's stack (a hot
 * route whose stack costs more than its work, or whose body must reach it as sent); the rest go to express.
 */
interface BareServing {
  prefix: string;
  handle: BareHandler;
}

type RouteHandler<
  Params extends TObject | undefined = undefined,
  Query extends TObject | undefined = undefined,
  Body extends TSchema | undefined = undefined,
> = (
  req: Request<
    Params extends TObject ? Static<Params> : Record<string, string>,
    unknown,
    Body extends TSchema ? Static<Body> : unknown,
    Query extends TObject ? Static<Query> : Record<string, unknown>
  >,
  res: Response,
  next: NextFunction,
) => unknown;

/** A declared route, served by express (`handler`), on the bare request (`bare`), or bare first, then express. */
type RouteDefinition<
  Params extends TObject | undefined = undefined,
  Query extends TObject | undefined = undefined,
  Body extends TSchema | undefined = undefined,
> = RouteDeclaration<Params, Query, Body> &
  (
    | { handler: RouteHandler<Params, Query, Body>; bare?: BareServing }
    | { handler?: undefined; bare: BareServing }
  );

interface RouteDeclaration<
  Params extends TObject | undefined = undefined,
  Query extends TObject | undefined = undefined,
  Body extends TSchema | undefined = undefined,
> {
  method: HttpMethod;
  /** Express path (`/api/v1/settlements/:settlementId`); OpenAPI gets `{settlementId}`. */
  path: string;
  summary: string;
  description?: string;
  /** The operation's name for SDK generators (`listWebhookDeliveries`). */
  operationId?: string;
  tags?: string[];
  /**
   * One scheme, or several any of which is accepted. `optional`: callers without credentials are served too.
   * Without `middleware` the handler authenticates itself (when the credential decides the body schema).
   */
  auth?: (RouteAuth | { schemes: string[]; middleware?: RequestHandler }) & { optional?: boolean };
  params?: Params;
  /** Query strings are coerced to the schema's types (`?limit=5` → 5) before validation. */
  query?: Query;
  body?: Body;
  /** The body may be left out (it is validated as `{}` then): documented as an optional request body. */
  bodyOptional?: boolean;
  /** The handler validates the body itself against `body` (when the key decides which of two bodies applies). */
  bodyValidatedByHandler?: boolean;
  /** Documented only: validated by the handler or a shared helper (for example `Idempotency-Key`). */
  headers?: JsonSchemaObject[];
  bodyExamples?: Record<string, unknown>;
  responses: Record<string, RouteResponse>;
  /** Error statuses, documented with the shared error body: `{ '404': 'no such settlement' }`. */
  errors?: Record<string, string>;
  /** Middleware run after authentication and validation, before the handler (rate limits, idempotency…). */
  before?: RequestHandler[];
}

export type AnyRoute = RouteDefinition<any, any, any>;

/** Declares a route once: `mountRoutes` serves it validated, `routesOpenApi` documents it, so they agree. */
export function defineRoute<
  Params extends TObject | undefined = undefined,
  Query extends TObject | undefined = undefined,
  Body extends TSchema | undefined = undefined,
>(route: RouteDefinition<Params, Query, Body>): RouteDefinition<Params, Query, Body> {
  return route;
}

/** Query and path strings whose schema says integer, number or boolean become one when they read as one. */
function coerceStrings(schema: TObject, values: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...values };
  for (const [name, property] of Object.entries(schema.properties)) {
    const value = out[name];
    if (typeof value !== 'string') continue;
    const type = (property as { type?: unknown }).type;
    if ((type === 'integer' || type === 'number') && /^-?[0-9]+(\.[0-9]+)?$/.test(value))
      out[name] = Number(value);
    else if (type === 'boolean' && (value === 'true' || value === 'false')) out[name] = value === 'true';
  }
  return out;
}

function validationMiddleware(route: AnyRoute): RequestHandler {
  const { params, query, body } = route;
  return (req, _res, next) => {
    if (params) assertValid(params, coerceStrings(params, req.params), 'params');
    if (query) {
      const coerced = assertValid(query, coerceStrings(query, { ...req.query }), 'query');
      // Express 5's req.query is a getter: the coerced copy replaces it for the handler.
      Object.defineProperty(req, 'query', { value: coerced, writable: true, configurable: true });
    }
    if (body && !route.bodyValidatedByHandler) {
      // No body at all is the empty object, which is what the handler gets when its schema allows it.
      req.body ??= {};
      assertValid(body, req.body, 'body');
    }
    next();
  };
}

/**
 * Puts `handlers` ahead of the route's `before` and documents `errors` (a rate limit wired where routes are
 * mounted). Throws when no such route is declared: a renamed route must not silently lose its limit.
 */
export function guardRoute(
  routes: AnyRoute[],
  method: HttpMethod,
  path: string,
  handlers: RequestHandler[],
  errors: Record<string, string> = {},
): void {
  const route = routes.find((r) => r.method === method && r.path === path);
  if (!route) throw new Error(`guardRoute: no route ${method.toUpperCase()} ${path} is declared`);
  route.before = [...handlers, ...(route.before ?? [])];
  route.errors = { ...(route.errors ?? {}), ...errors };
}

const BARE_ROUTES = new WeakMap<Express, BareServing[]>();

/** The bare routes mounted on `app`: the server offers each request to them before express (libs/runtime). */
export function bareRoutesOf(app: Express): readonly BareServing[] {
  return BARE_ROUTES.get(app) ?? [];
}

export function mountRoutes(app: Express, routes: AnyRoute[]): void {
  for (const route of routes) {
    if (route.bare) {
      const bare = BARE_ROUTES.get(app) ?? [];
      bare.push(route.bare);
      BARE_ROUTES.set(app, bare);
    }
    if (!route.handler) continue;
    app[route.method](
      route.path,
      ...(route.auth?.middleware ? [route.auth.middleware] : []),
      validationMiddleware(route),
      ...(route.before ?? []),
      route.handler as RequestHandler,
    );
  }
}

/** `:id` and express 5 wildcards (`*rest`) become OpenAPI templates (`{id}`, `{rest}`). */
const openApiPath = (path: string) => path.replace(/[:*]([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');

function responseObject(response: RouteResponse) {
  if ('description' in response && typeof response.description === 'string' && !('type' in response)) {
    const { description, schema, contentType = 'application/json', headers } = response as DescribedResponse;
    return {
      description,
      ...(headers ? { headers } : {}),
      ...(schema ? { content: { [contentType]: { schema: plainSchema(schema as TSchema) } } } : {}),
    };
  }
  const schema = response as TSchema;
  return jsonResponse(schema, schema.description ?? 'success');
}

function operationOf(route: AnyRoute) {
  const schemes = route.auth
    ? [
        ...(route.auth.optional ? [''] : []),
        ...('schemes' in route.auth ? route.auth.schemes : [route.auth.scheme]),
      ]
    : [];
  return {
    ...(route.operationId ? { operationId: route.operationId } : {}),
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    ...(route.tags ? { tags: route.tags } : {}),
    ...(schemes.length ? { security: schemes.map((scheme) => (scheme ? { [scheme]: [] } : {})) } : {}),
    parameters: [
      ...(route.params ? schemaParameters('path', route.params) : []),
      ...(route.query ? schemaParameters('query', route.query) : []),
      ...(route.headers ?? []),
    ],
    ...(route.body
      ? {
          requestBody: jsonRequestBody(route.body, {
            examples: route.bodyExamples,
            required: !route.bodyOptional,
          }),
        }
      : {}),
    responses: {
      ...Object.fromEntries(
        Object.entries(route.responses).map(([status, response]) => [status, responseObject(response)]),
      ),
      ...errorResponses({
        ...(route.body || route.query || route.params
          ? { '400': 'a field breaks a rule (field and rule named)' }
          : {}),
        ...(route.auth ? { '401': 'missing or invalid credentials' } : {}),
        ...(route.errors ?? {}),
      }),
    },
  };
}

/** A whole OpenAPI document from the declared routes plus the document's own facts (title, schemes…). */
export function routesOpenApi(options: Omit<OpenApiDocumentOptions, 'paths'>, routes: AnyRoute[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    if (route.method === 'head') continue;
    const path = openApiPath(route.path);
    paths[path] ??= {};
    paths[path][route.method] = operationOf(route);
  }
  return openApiDocument({ ...options, paths });
}

/** The route serving the OpenAPI document of `routes` (and of itself) at `path`, readable from any origin. */
export function openApiRoute(
  path: string,
  options: Omit<OpenApiDocumentOptions, 'paths'>,
  routes: AnyRoute[],
): AnyRoute {
  let body = '';
  const route = defineRoute({
    method: 'get',
    path,
    summary: 'This OpenAPI 3.1 document',
    responses: { '200': { description: 'OpenAPI 3.1 document', schema: { type: 'object' } } },
    handler: (_req, res) => {
      res.setHeader('Access-Control-Allow-Origin', '*');
      res.type('application/json').send(body);
    },
  });
  body = JSON.stringify(routesOpenApi(options, [...routes, route]));
  return route;
}
