import type { TSchema } from '@sinclair/typebox';
import {
  Account,
  AccountPatch,
  AccountPatchResponse,
  ApiKeyRotated,
  NonceResponse,
  VerifyRequest,
  VerifyResponse,
  WebhookSecretRotated,
} from '../accounts/schemas';
import { ErrorResponse } from '../shared/schema';
import {
  Catalog,
  EndpointCreate,
  EndpointPatch,
  ListQuery,
  Skill,
  SkillCreate,
  SkillList,
  SkillMdReplace,
  SkillPatch,
  SuspendBody,
} from '../skills/schemas';

/** TypeBox schemas are JSON Schema; only TypeBox's symbol keys are dropped (JSON.stringify does that). */
function plain(schema: TSchema): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema));
}

interface Operation {
  method: 'get' | 'post' | 'patch' | 'put';
  path: string;
  summary: string;
  auth?: 'seller' | 'operator';
  body?: TSchema;
  bodyOptional?: boolean;
  response?: { status: number; schema?: TSchema; contentType?: string; description?: string };
  query?: TSchema;
  idempotent?: boolean;
}

const nameParam = {
  name: 'name',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^[a-z0-9]+(-[a-z0-9]+)*$' },
};
const endpointParam = { name: 'endpointId', in: 'path', required: true, schema: { type: 'string' } };

const operations: Operation[] = [
  {
    method: 'post',
    path: '/api/v1/auth/siwe/nonce',
    summary: 'Get a single-use SIWE nonce (valid 5 minutes)',
    response: { status: 201, schema: NonceResponse },
  },
  {
    method: 'post',
    path: '/api/v1/auth/siwe/verify',
    summary: 'Sign in with Ethereum; the first login creates the account and returns the API key once (201)',
    body: VerifyRequest,
    response: { status: 200, schema: VerifyResponse },
  },
  {
    method: 'get',
    path: '/api/v1/account',
    summary: 'The account and its settings',
    auth: 'seller',
    response: { status: 200, schema: Account },
  },
  {
    method: 'patch',
    path: '/api/v1/account',
    summary: 'Change payout address, webhook URL, settlement frequency or minimum settlement',
    auth: 'seller',
    body: AccountPatch,
    response: { status: 200, schema: AccountPatchResponse },
  },
  {
    method: 'post',
    path: '/api/v1/account/api-key/rotate',
    summary: 'Replace the API key; the old one stops working at once',
    auth: 'seller',
    response: { status: 200, schema: ApiKeyRotated },
  },
  {
    method: 'post',
    path: '/api/v1/account/webhook-secret/rotate',
    summary: 'Replace the webhook signing secret (shown once)',
    auth: 'seller',
    response: { status: 200, schema: WebhookSecretRotated },
  },
  {
    method: 'post',
    path: '/api/v1/manage/skills',
    summary: 'Create a skill (PENDING_VALIDATION, validated in the background)',
    auth: 'seller',
    body: SkillCreate,
    response: { status: 201, schema: Skill },
    idempotent: true,
  },
  {
    method: 'get',
    path: '/api/v1/manage/skills',
    summary: "List the seller's skills (every status)",
    auth: 'seller',
    query: ListQuery,
    response: { status: 200, schema: SkillList },
  },
  {
    method: 'get',
    path: '/api/v1/manage/skills/{name}',
    summary: 'One skill with its endpoints',
    auth: 'seller',
    response: { status: 200, schema: Skill },
  },
  {
    method: 'patch',
    path: '/api/v1/manage/skills/{name}',
    summary: 'Change a skill (name is immutable); a new apiBaseUrl is validated again',
    auth: 'seller',
    body: SkillPatch,
    response: { status: 200, schema: Skill },
  },
  {
    method: 'post',
    path: '/api/v1/manage/skills/{name}/archive',
    summary: 'Archive the skill (final)',
    auth: 'seller',
    response: { status: 200, schema: Skill },
  },
  {
    method: 'post',
    path: '/api/v1/manage/skills/{name}/validate',
    summary: 'Retry validation of a VALIDATION_FAILED skill',
    auth: 'seller',
    response: { status: 202, schema: Skill },
  },
  {
    method: 'post',
    path: '/api/v1/manage/skills/{name}/endpoints',
    summary: 'Add an endpoint (SKILL.md is regenerated)',
    auth: 'seller',
    body: EndpointCreate,
    response: { status: 201, schema: Skill },
    idempotent: true,
  },
  {
    method: 'patch',
    path: '/api/v1/manage/skills/{name}/endpoints/{endpointId}',
    summary: 'Change an endpoint (SKILL.md is regenerated)',
    auth: 'seller',
    body: EndpointPatch,
    response: { status: 200, schema: Skill },
  },
  {
    method: 'post',
    path: '/api/v1/manage/skills/{name}/endpoints/{endpointId}/deactivate',
    summary: 'Deactivate an endpoint (SKILL.md is regenerated)',
    auth: 'seller',
    response: { status: 200, schema: Skill },
  },
  {
    method: 'get',
    path: '/api/v1/manage/skills/{name}/skill-md',
    summary: 'The current SKILL.md of the skill, whatever its status',
    auth: 'seller',
    response: { status: 200, contentType: 'text/markdown', description: 'SKILL.md' },
  },
  {
    method: 'put',
    path: '/api/v1/manage/skills/{name}/skill-md',
    summary: 'Replace SKILL.md by hand. A later endpoint change regenerates it and replaces the hand edit.',
    auth: 'seller',
    body: SkillMdReplace,
    response: { status: 200, schema: Skill },
  },
  {
    method: 'post',
    path: '/api/v1/operator/skills/{name}/suspend',
    summary: 'Operator: suspend a skill',
    auth: 'operator',
    body: SuspendBody,
    bodyOptional: true,
    response: { status: 200, schema: Skill },
  },
  {
    method: 'post',
    path: '/api/v1/operator/skills/{name}/unsuspend',
    summary: 'Operator: lift a suspension (the skill is validated again)',
    auth: 'operator',
    response: { status: 200, schema: Skill },
  },
  {
    method: 'get',
    path: '/api/v1/skills',
    summary: 'Public catalog of ACTIVE skills, filterable by category and text, paginated',
    query: ListQuery,
    response: { status: 200, schema: Catalog },
  },
  {
    method: 'get',
    path: '/api/v1/skills/{name}/SKILL.md',
    summary: 'Public SKILL.md of an ACTIVE skill',
    response: { status: 200, contentType: 'text/markdown', description: 'SKILL.md' },
  },
  {
    method: 'get',
    path: '/api/v1/openapi.json',
    summary: 'This document',
    response: { status: 200, description: 'OpenAPI 3.1 document' },
  },
];

function queryParameters(schema: TSchema) {
  const properties = (schema as { properties?: Record<string, TSchema> }).properties ?? {};
  return Object.entries(properties).map(([name, property]) => ({
    name,
    in: 'query',
    required: false,
    schema: plain(property),
  }));
}

/** The OpenAPI 3.1 document of the registry, built from the TypeBox schemas that validate requests. */
export function buildOpenApiDocument(publicBaseUrl: string) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of operations) {
    const parameters = [
      ...(op.path.includes('{name}') ? [nameParam] : []),
      ...(op.path.includes('{endpointId}') ? [endpointParam] : []),
      ...(op.query ? queryParameters(op.query) : []),
      ...(op.idempotent
        ? [
            {
              name: 'Idempotency-Key',
              in: 'header',
              required: false,
              schema: { type: 'string', maxLength: 255 },
            },
          ]
        : []),
    ];
    const response = op.response ?? { status: 200 };
    const errorContent = { 'application/json': { schema: plain(ErrorResponse) } };
    paths[op.path] ??= {};
    paths[op.path]![op.method] = {
      summary: op.summary,
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(op.auth === 'seller'
        ? { security: [{ apiKey: [] }, { session: [] }] }
        : op.auth === 'operator'
          ? { security: [{ operator: [] }] }
          : {}),
      ...(op.body
        ? {
            requestBody: {
              required: !op.bodyOptional,
              content: { 'application/json': { schema: plain(op.body) } },
            },
          }
        : {}),
      responses: {
        [String(response.status)]: {
          description: response.description ?? 'success',
          ...(response.schema
            ? { content: { 'application/json': { schema: plain(response.schema) } } }
            : response.contentType
              ? { content: { [response.contentType]: { schema: { type: 'string' } } } }
              : {}),
        },
        ...(op.body || op.query
          ? {
              '400': {
                description: 'a field breaks a rule: error.field and error.rule say which',
                content: errorContent,
              },
            }
          : {}),
        ...(op.auth
          ? { '401': { description: 'missing, malformed or unknown credentials', content: errorContent } }
          : {}),
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Paygate registry API',
      version: '1.0.0',
      description:
        'Seller accounts (Sign-In with Ethereum), API keys, skills, endpoints, SKILL.md and the public catalog.',
    },
    servers: [{ url: publicBaseUrl }],
    components: {
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          description: 'the seller API key: Authorization: Bearer sk_…',
        },
        session: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: 'dashboard session token from /api/v1/auth/siwe/verify',
        },
        operator: { type: 'http', scheme: 'bearer', description: 'OPERATOR_TOKEN' },
      },
    },
    paths,
  };
}

export const openApiOperations = operations;
