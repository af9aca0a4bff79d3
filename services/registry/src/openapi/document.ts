import {
  errorResponses,
  idempotencyKeyParameter,
  jsonRequestBody,
  jsonResponse,
  openApiDocument,
  schemaParameters,
  securitySchemes,
} from '@paygate/http';
import type { TObject, TSchema } from '@sinclair/typebox';
import {
  Account,
  AccountPatch,
  AccountPatchResponse,
  ApiKeyRotated,
  NonceResponse,
  PublishableKeyRotated,
  VerifyRequest,
  VerifyResponse,
  WebhookSecretRotated,
} from '../accounts/schemas';
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

interface Operation {
  method: 'get' | 'post' | 'patch' | 'put';
  path: string;
  summary: string;
  auth?: 'seller' | 'operator';
  body?: TSchema;
  bodyOptional?: boolean;
  response?: { status: number; schema?: TSchema; contentType?: string; description?: string };
  query?: TObject;
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
    path: '/api/v1/account/publishable-key/rotate',
    summary: 'Replace the publishable key (pk_…); pages using the old one must be updated',
    auth: 'seller',
    response: { status: 200, schema: PublishableKeyRotated },
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

/** The OpenAPI 3.1 document of the registry, built from the TypeBox schemas that validate requests. */
export function buildOpenApiDocument(publicBaseUrl: string) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of operations) {
    const parameters = [
      ...(op.path.includes('{name}') ? [nameParam] : []),
      ...(op.path.includes('{endpointId}') ? [endpointParam] : []),
      ...(op.query ? schemaParameters('query', op.query, { allOptional: true }) : []),
      ...(op.idempotent
        ? [idempotencyKeyParameter('the same key with the same request replays the stored response')]
        : []),
    ];
    const response = op.response ?? { status: 200 };
    paths[op.path] ??= {};
    paths[op.path]![op.method] = {
      summary: op.summary,
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(op.auth === 'seller'
        ? { security: [{ apiKey: [] }, { session: [] }] }
        : op.auth === 'operator'
          ? { security: [{ operator: [] }] }
          : {}),
      ...(op.body ? { requestBody: jsonRequestBody(op.body, { required: !op.bodyOptional }) } : {}),
      responses: {
        [String(response.status)]: response.schema
          ? jsonResponse(response.schema, response.description ?? 'success')
          : {
              description: response.description ?? 'success',
              ...(response.contentType
                ? { content: { [response.contentType]: { schema: { type: 'string' } } } }
                : {}),
            },
        ...(op.body || op.query
          ? errorResponses({ '400': 'a field breaks a rule: error.field and error.rule say which' })
          : {}),
        ...(op.auth ? errorResponses({ '401': 'missing, malformed or unknown credentials' }) : {}),
      },
    };
  }
  return openApiDocument({
    title: 'Paygate registry API',
    description:
      'Seller accounts (Sign-In with Ethereum), API keys, skills, endpoints, SKILL.md and the public catalog.',
    serverUrl: publicBaseUrl,
    securitySchemes: {
      apiKey: securitySchemes.apiKey,
      session: {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'JWT',
        description: 'dashboard session token from /api/v1/auth/siwe/verify',
      },
      operator: securitySchemes.operatorToken,
    },
    paths,
  });
}

export const openApiOperations = operations;
