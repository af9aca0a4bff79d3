import { DEFAULT_HOLD_HOURS } from '@paygate/contracts';
import { badRequest } from '@paygate/http';
import type { HttpMethod, SkillType } from '../db';
import { parseUsdcAmountIn } from '../shared/schema';

const CATEGORY_PATTERN = /^[a-z0-9]+([ -][a-z0-9]+)*$/;

/** Categories arrive as a list or one comma-separated string; stored trimmed, lowercased and unique. */
export function normalizeCategories(input: string[] | string | undefined): string[] {
  if (input === undefined) return [];
  const raw = Array.isArray(input) ? input : input.split(',');
  const result: string[] = [];
  for (const item of raw) {
    const tag = item.trim().toLowerCase();
    if (tag === '' && !Array.isArray(input)) continue;
    if (!CATEGORY_PATTERN.test(tag) || tag.length > 40) {
      throw badRequest(
        'categories',
        'each tag must be 1-40 lowercase letters or digits, separated by single spaces or hyphens',
      );
    }
    if (!result.includes(tag)) result.push(tag);
  }
  if (result.length > 20) throw badRequest('categories', 'must have at most 20 tags');
  return result;
}

export function parsePrice(field: string, input: string | number): bigint {
  const micro = parseUsdcAmountIn(field, input);
  if (micro <= 0n) throw badRequest(field, 'must be greater than 0');
  return micro;
}

const PATH_PARAM = /^:[A-Za-z_][A-Za-z0-9_]*$/;
const PATH_PARAM_RULE = 'a parameter is a whole segment :name, name matching [A-Za-z_][A-Za-z0-9_]*';

export function checkEndpointPath(field: string, path: string): string {
  const segments = path.split('/').slice(1);
  if (segments.some((s) => s === '.' || s === '..'))
    throw badRequest(field, 'must not contain . or .. segments');
  const names = new Set<string>();
  for (const segment of segments) {
    if (!segment.includes(':')) continue;
    if (!PATH_PARAM.test(segment)) throw badRequest(field, PATH_PARAM_RULE);
    if (names.has(segment)) throw badRequest(field, `must not name the parameter ${segment} twice`);
    names.add(segment);
  }
  // The public SKILL.md of the skill lives at <skill base>/SKILL.md: no endpoint may shadow it.
  if (/^\/skill\.md\/?$/i.test(path))
    throw badRequest(field, 'is reserved (/SKILL.md is the skill description)');
  return path;
}

/** A path's shape (`:param` → `:`): same-shape paths match the same URLs; overlaps are fine (static wins). */
function pathShape(path: string): string {
  return path
    .split('/')
    .map((segment) => (segment.startsWith(':') ? ':' : segment))
    .join('/');
}

/** 400 when `path` has the shape of another active endpoint's path (with different parameter names). */
export function refuseAmbiguousPath(
  field: string,
  candidate: { path: string; method: string },
  others: Array<{ path: string; method: string }>,
): void {
  const shape = pathShape(candidate.path);
  const twin = others.find(
    (e) => e.method === candidate.method && e.path !== candidate.path && pathShape(e.path) === shape,
  );
  if (twin) {
    throw badRequest(
      field,
      `must not match the same URLs as ${twin.method} ${twin.path}: paths differing only in parameter names are ambiguous`,
    );
  }
}

export interface TypeFields {
  type: SkillType;
  durationDays: number | null;
  requiresShipping: boolean | null;
  holdPeriodHours: number;
}

/** Type-specific fields: durationDays only (and always) for SaaS and Subscription, requiresShipping only for Product. */
export function checkTypeFields(fields: TypeFields): TypeFields {
  const needsDuration = fields.type === 'SaaS' || fields.type === 'Subscription';
  if (needsDuration && fields.durationDays === null) {
    throw badRequest('durationDays', `is required for type ${fields.type}`);
  }
  if (!needsDuration && fields.durationDays !== null) {
    throw badRequest('durationDays', 'is only allowed for types SaaS and Subscription');
  }
  if (fields.type !== 'Product' && fields.requiresShipping !== null) {
    throw badRequest('requiresShipping', 'is only allowed for type Product');
  }
  if (
    !Number.isInteger(fields.holdPeriodHours) ||
    fields.holdPeriodHours < 0 ||
    fields.holdPeriodHours > 168
  ) {
    throw badRequest('holdPeriodHours', 'must be an integer from 0 to 168');
  }
  return {
    ...fields,
    requiresShipping: fields.type === 'Product' ? (fields.requiresShipping ?? false) : null,
  };
}

export function defaultHoldHours(type: SkillType): number {
  return DEFAULT_HOLD_HOURS[type];
}

export interface EndpointInput {
  path: string;
  method: HttpMethod;
  description: string;
  priceMicro: bigint;
}

export function checkEndpointInput(
  prefix: string,
  input: { path: string; method: HttpMethod; description?: string; priceUsdc: string | number },
): EndpointInput {
  return {
    path: checkEndpointPath(`${prefix}path`, input.path),
    method: input.method,
    description: input.description ?? '',
    priceMicro: parsePrice(`${prefix}priceUsdc`, input.priceUsdc),
  };
}

/** 400 naming the first endpoint of a new skill's list that repeats an earlier (method, path): an input rule. */
export function refuseDuplicateRoutes(endpoints: Array<{ path: string; method: string }>): void {
  const seen = new Map<string, number>();
  for (const [i, e] of endpoints.entries()) {
    const key = `${e.method} ${e.path}`;
    const first = seen.get(key);
    if (first !== undefined) {
      throw badRequest(
        `endpoints.${i}.path`,
        `must be unique per method among the skill's endpoints (${key} is endpoints.${first})`,
      );
    }
    seen.set(key, i);
  }
}

/** The first endpoint of a new skill's list whose path is ambiguous with an earlier one (400 naming its field). */
export function refuseAmbiguousPaths(endpoints: Array<{ path: string; method: string }>): void {
  for (const [i, e] of endpoints.entries())
    refuseAmbiguousPath(`endpoints.${i}.path`, e, endpoints.slice(0, i));
}
