import { Nullable } from '@paygate/contracts';
import { type TSchema, Type } from '@sinclair/typebox';
import { HTTP_METHODS, SKILL_MODES, SKILL_STATUSES, SKILL_TYPES } from '../db';
import { IsoTime, StringEnum, UsdcAmountIn, UsdcAmountOut } from '../shared/schema';

export const MAX_ENDPOINTS_PER_SKILL = 100;
/** Endpoints a skill keeps in all, deactivated ones included (each is in every skill.updated event). */
export const MAX_ENDPOINT_ROWS_PER_SKILL = 200;

export const SkillName = Type.String({
  minLength: 2,
  maxLength: 64,
  pattern: '^[a-z0-9]+(-[a-z0-9]+)*$',
  'x-rule': 'must be kebab-case: lowercase letters and digits separated by single hyphens',
  description: 'URL slug in kebab-case, unique across Paygate; part of every public URL of the skill',
});
const EndpointPath = Type.String({
  minLength: 1,
  maxLength: 512,
  pattern: '^/(([A-Za-z0-9._~-]+|:[A-Za-z_][A-Za-z0-9_]*)(/([A-Za-z0-9._~-]+|:[A-Za-z_][A-Za-z0-9_]*))*/?)?$',
  'x-rule':
    'must start with / and contain only URL path segments (letters, digits, . _ ~ -) or whole-segment parameters :name (name matching [A-Za-z_][A-Za-z0-9_]*)',
  description:
    'URL path starting with /; appended to apiBaseUrl and to the public skill URL. /SKILL.md is reserved. ' +
    'A whole segment :name (name matching [A-Za-z_][A-Za-z0-9_]*) is a parameter matching any one segment ' +
    '(/users/:id); static segments win over parameters, and two paths differing only in parameter names are refused',
});
const Categories = Type.Union(
  [
    Type.Array(Type.String({ minLength: 1, maxLength: 40 }), { maxItems: 20 }),
    Type.String({ maxLength: 800, description: 'comma-separated tags' }),
  ],
  { description: 'discovery tags: an array of strings or one comma-separated string' },
);

export const EndpointCreate = Type.Object(
  {
    path: EndpointPath,
    method: StringEnum(HTTP_METHODS),
    description: Type.Optional(Type.String({ maxLength: 2000, description: 'default empty' })),
    priceUsdc: UsdcAmountIn,
  },
  { additionalProperties: false },
);

export const EndpointPatch = Type.Object(
  {
    path: Type.Optional(EndpointPath),
    method: Type.Optional(StringEnum(HTTP_METHODS)),
    description: Type.Optional(Type.String({ maxLength: 2000 })),
    priceUsdc: Type.Optional(UsdcAmountIn),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const SkillCreate = Type.Object(
  {
    name: SkillName,
    displayName: Type.String({ minLength: 1, maxLength: 120 }),
    description: Type.String({ minLength: 10, maxLength: 5000 }),
    apiBaseUrl: Type.String({
      minLength: 1,
      maxLength: 2048,
      description: 'the seller API base URL; https in production',
    }),
    mode: Type.Optional(StringEnum(SKILL_MODES, { default: 'PROXY' })),
    type: StringEnum(SKILL_TYPES),
    categories: Type.Optional(Categories),
    durationDays: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 3650,
        description: 'required for SaaS and Subscription; not allowed otherwise',
      }),
    ),
    requiresShipping: Type.Optional(Type.Boolean({ description: 'only for Product (default false)' })),
    holdPeriodHours: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 168,
        description: 'default by type: API 0, Content 0, SaaS 24, Subscription 24, Service 48, Product 72',
      }),
    ),
    endpoints: Type.Optional(Type.Array(EndpointCreate, { maxItems: MAX_ENDPOINTS_PER_SKILL })),
  },
  { additionalProperties: false },
);

export const SkillPatch = Type.Object(
  {
    displayName: Type.Optional(Type.String({ minLength: 1, maxLength: 120 })),
    description: Type.Optional(Type.String({ minLength: 10, maxLength: 5000 })),
    apiBaseUrl: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
    mode: Type.Optional(StringEnum(SKILL_MODES)),
    type: Type.Optional(StringEnum(SKILL_TYPES)),
    categories: Type.Optional(Categories),
    durationDays: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 3650 }))),
    requiresShipping: Type.Optional(Nullable(Type.Boolean())),
    holdPeriodHours: Type.Optional(Type.Integer({ minimum: 0, maximum: 168 })),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const SkillMdReplace = Type.Object(
  {
    content: Type.String({
      minLength: 1,
      maxLength: 65536,
      description:
        'the whole SKILL.md: YAML frontmatter with name, base_url, version, description, endpoints, then Markdown',
    }),
  },
  { additionalProperties: false },
);

/** One page of a list: its items and the cursor of the next page (null: the last page). */
const page = <T extends TSchema>(item: T) =>
  Type.Object({ data: Type.Array(item), nextCursor: Nullable(Type.String()) });

const Endpoint = Type.Object({
  endpointId: Type.String(),
  path: Type.String(),
  method: StringEnum(HTTP_METHODS),
  description: Type.String(),
  priceUsdc: UsdcAmountOut,
  isHealthy: Type.Boolean(),
  active: Type.Boolean(),
  url: Type.String({ description: '{base_url}/api/v1/skills/<skill_name><path>' }),
});

export const Skill = Type.Object({
  skillId: Type.String(),
  sellerId: Type.String(),
  name: Type.String(),
  displayName: Type.String(),
  description: Type.String(),
  apiBaseUrl: Type.String(),
  mode: StringEnum(SKILL_MODES),
  type: StringEnum(SKILL_TYPES),
  categories: Type.Array(Type.String()),
  durationDays: Nullable(Type.Integer()),
  requiresShipping: Nullable(Type.Boolean()),
  holdPeriodHours: Type.Integer(),
  status: StringEnum(SKILL_STATUSES),
  statusReason: Nullable(Type.String()),
  revision: Type.Integer(),
  baseUrl: Type.String({ description: 'the public base URL of the skill: {base_url}/api/v1/skills/<name>' }),
  skillMdUrl: Type.String(),
  skillMdVersion: Type.String(),
  skillMdSource: StringEnum(['generated', 'manual'] as const),
  endpoints: Type.Array(Endpoint),
  createdAt: IsoTime,
  updatedAt: IsoTime,
});

export const SkillList = page(Skill);

const CatalogEndpoint = Type.Object({
  path: Type.String(),
  method: StringEnum(HTTP_METHODS),
  description: Type.String(),
  priceUsdc: UsdcAmountOut,
  price: Type.String({ description: 'dollar-prefixed, e.g. $0.05' }),
  isHealthy: Type.Boolean(),
  url: Type.String(),
});

const CatalogSkill = Type.Object({
  name: Type.String(),
  displayName: Type.String(),
  description: Type.String(),
  type: StringEnum(SKILL_TYPES),
  mode: StringEnum(SKILL_MODES),
  categories: Type.Array(Type.String()),
  durationDays: Nullable(Type.Integer()),
  requiresShipping: Nullable(Type.Boolean()),
  baseUrl: Type.String(),
  skillMdUrl: Type.String(),
  apiBaseUrl: Type.Optional(
    Type.String({ description: 'only for TICKET mode, where agents call the seller directly' }),
  ),
  endpoints: Type.Array(CatalogEndpoint),
});

export const Catalog = page(CatalogSkill);

export const ListQuery = Type.Object(
  {
    category: Type.Optional(Type.String({ minLength: 1, maxLength: 40 })),
    q: Type.Optional(
      Type.String({ maxLength: 100, description: 'text search in name, display name and description' }),
    ),
    limit: Type.Optional(
      Type.String({
        pattern: '^(100|[1-9][0-9]?)$',
        'x-rule': 'must be an integer from 1 to 100',
        description: '1 to 100, default 20',
      }),
    ),
    cursor: Type.Optional(Type.String({ maxLength: 200, description: 'nextCursor of the previous page' })),
  },
  { additionalProperties: true },
);

export const SuspendBody = Type.Object(
  {
    reason: Type.Optional(
      Type.String({ minLength: 1, maxLength: 500, description: 'shown as statusReason' }),
    ),
  },
  { additionalProperties: false },
);
