import { type TObject, type TSchema, Type } from '@sinclair/typebox';
import { IDEMPOTENCY_KEY_PATTERN } from './idempotency';

/** JSON Schema of the one error body every service answers with (see errorHandler). */
export const ErrorBodySchema = Type.Object({
  error: Type.Object({
    code: Type.String(),
    message: Type.String(),
    field: Type.Optional(Type.String({ description: 'the input that broke a rule' })),
    rule: Type.Optional(Type.String({ description: 'the rule it broke, readable' })),
    requestId: Type.String({ description: 'also in the x-request-id header' }),
  }),
});

export type JsonSchemaObject = Record<string, unknown>;

/** TypeBox schemas are JSON Schema 2020-12 (OpenAPI 3.1's dialect); JSON drops TypeBox's symbol keys. */
export function plainSchema(schema: TSchema): JsonSchemaObject {
  return JSON.parse(JSON.stringify(schema));
}

export function jsonResponse(schema: TSchema, description: string) {
  return { description, content: { 'application/json': { schema: plainSchema(schema) } } };
}

export function jsonRequestBody(
  schema: TSchema,
  options: { required?: boolean; examples?: Record<string, unknown> } = {},
) {
  const { required = true, examples } = options;
  return {
    required,
    content: {
      'application/json': {
        schema: plainSchema(schema),
        ...(examples
          ? { examples: Object.fromEntries(Object.entries(examples).map(([key, value]) => [key, { value }])) }
          : {}),
      },
    },
  };
}

/** Error responses keyed by status, each with the shared error body: errorResponses({ '404': 'not_found' }). */
export function errorResponses(entries: Record<string, string>) {
  return Object.fromEntries(
    Object.entries(entries).map(([status, description]) => [
      status,
      jsonResponse(ErrorBodySchema, description),
    ]),
  );
}

export function schemaParameters(where: 'query' | 'path', schema: TObject) {
  return Object.entries(schema.properties).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || (schema.required ?? []).includes(name),
    ...(property.description ? { description: property.description } : {}),
    schema: plainSchema(property),
  }));
}

/** The Idempotency-Key header parameter (the same rule every service validates with). */
export function idempotencyKeyParameter(description?: string) {
  return {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    ...(description ? { description } : {}),
    schema: { type: 'string', pattern: IDEMPOTENCY_KEY_PATTERN.source },
  };
}

/** The bearer security schemes the services use; pick the ones a document needs. */
export const securitySchemes = {
  apiKey: { type: 'http', scheme: 'bearer', description: 'the seller API key: Authorization: Bearer sk_…' },
  publishableKey: { type: 'http', scheme: 'bearer', description: 'pk_… publishable key (the widget)' },
  operatorToken: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <OPERATOR_TOKEN>' },
} as const;

export interface OpenApiDocumentOptions {
  title: string;
  version?: string;
  description: string;
  /** Absolute base URL of the public API, when the document names one. */
  serverUrl?: string;
  securitySchemes?: Record<string, unknown>;
  /** Named component schemas; TypeBox schemas are turned into plain JSON Schema. `Error` is always added. */
  schemas?: Record<string, TSchema | JsonSchemaObject>;
  paths: Record<string, unknown>;
  webhooks?: Record<string, unknown>;
}

/** An OpenAPI 3.1 document with the parts every service shares (version, error schema, security schemes). */
export function openApiDocument(options: OpenApiDocumentOptions) {
  const schemas = Object.fromEntries(
    Object.entries({ ...(options.schemas ?? {}), Error: ErrorBodySchema }).map(([name, schema]) => [
      name,
      plainSchema(schema as TSchema),
    ]),
  );
  return {
    openapi: '3.1.0',
    info: { title: options.title, version: options.version ?? '1.0.0', description: options.description },
    ...(options.serverUrl ? { servers: [{ url: options.serverUrl }] } : {}),
    components: {
      ...(options.securitySchemes ? { securitySchemes: options.securitySchemes } : {}),
      schemas,
    },
    paths: options.paths,
    ...(options.webhooks ? { webhooks: options.webhooks } : {}),
  };
}
