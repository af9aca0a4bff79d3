import type { HttpMethod, Skill, SkillMode, SkillType } from './types';

export const SKILL_TYPES: SkillType[] = ['API', 'SaaS', 'Product', 'Service', 'Subscription', 'Content'];
export const METHODS: HttpMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** SPEC's default hold period per type (hours in escrow before settlement). */
export const DEFAULT_HOLD_HOURS: Record<SkillType, number> = {
  API: 0,
  Content: 0,
  SaaS: 24,
  Subscription: 24,
  Service: 48,
  Product: 72,
};

export const usesDuration = (type: SkillType) => type === 'SaaS' || type === 'Subscription';
export const usesShipping = (type: SkillType) => type === 'Product';

export interface EndpointDraft {
  endpointId?: string;
  path: string;
  method: HttpMethod;
  priceUsdc: string;
  description: string;
}

export interface SkillDraft {
  name: string;
  displayName: string;
  description: string;
  apiBaseUrl: string;
  type: SkillType;
  mode: SkillMode;
  categories: string;
  durationDays: string;
  requiresShipping: boolean;
  /** Empty means "the type's default". */
  holdPeriodHours: string;
  endpoints: EndpointDraft[];
}

export function emptyDraft(): SkillDraft {
  return {
    name: '',
    displayName: '',
    description: '',
    apiBaseUrl: 'https://',
    type: 'API',
    mode: 'PROXY',
    categories: '',
    durationDays: '30',
    requiresShipping: false,
    holdPeriodHours: '',
    endpoints: [{ path: '/', method: 'GET', priceUsdc: '0.01', description: '' }],
  };
}

export function draftFromSkill(skill: Skill): SkillDraft {
  return {
    name: skill.name,
    displayName: skill.displayName,
    description: skill.description,
    apiBaseUrl: skill.apiBaseUrl,
    type: skill.type,
    mode: skill.mode,
    categories: skill.categories.join(', '),
    durationDays: skill.durationDays === null ? '30' : String(skill.durationDays),
    requiresShipping: skill.requiresShipping ?? false,
    holdPeriodHours: String(skill.holdPeriodHours),
    endpoints: skill.endpoints
      .filter((e) => e.active)
      .map((e) => ({
        endpointId: e.endpointId,
        path: e.path,
        method: e.method,
        priceUsdc: e.priceUsdc,
        description: e.description,
      })),
  };
}

/** A kebab-case slug from a display name ("Weather Now!" → "weather-now"). */
export function slugify(text: string): string {
  return text
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 64);
}

/**
 * The body of POST /api/v1/manage/skills (or, with `forUpdate`, PATCH …/:name: no name, no endpoints).
 * Type-specific fields are sent only for the types that use them; values the API checks are passed as typed,
 * so the API's own rule is what the seller sees.
 */
export function skillBody(draft: SkillDraft, options: { forUpdate?: boolean } = {}): Record<string, unknown> {
  const body: Record<string, unknown> = {
    displayName: draft.displayName.trim(),
    description: draft.description.trim(),
    apiBaseUrl: draft.apiBaseUrl.trim(),
    type: draft.type,
    mode: draft.mode,
    categories: draft.categories
      .split(',')
      .map((c) => c.trim())
      .filter(Boolean),
  };
  if (!options.forUpdate) body.name = draft.name.trim();
  if (usesDuration(draft.type)) body.durationDays = toNumber(draft.durationDays);
  if (usesShipping(draft.type)) body.requiresShipping = draft.requiresShipping;
  if (draft.holdPeriodHours.trim() !== '') body.holdPeriodHours = toNumber(draft.holdPeriodHours);
  if (!options.forUpdate) body.endpoints = draft.endpoints.map(endpointBody);
  return body;
}

export function endpointBody(endpoint: EndpointDraft): Record<string, unknown> {
  return {
    path: endpoint.path.trim(),
    method: endpoint.method,
    priceUsdc: endpoint.priceUsdc.trim(),
    description: endpoint.description.trim(),
  };
}

/** Integers stay numbers for the API; anything else is sent as typed so the API names the rule it breaks. */
function toNumber(text: string): number | string {
  const trimmed = text.trim();
  return /^-?\d+$/.test(trimmed) ? Number(trimmed) : trimmed;
}

/** The hold period the API will apply: the one typed, or the type's default. */
export function effectiveHoldHours(draft: SkillDraft): string {
  return draft.holdPeriodHours.trim() || String(DEFAULT_HOLD_HOURS[draft.type]);
}

/** Copyable examples for an endpoint's public URL: curl (gets the 402) and the agent client (pays it). */
export function endpointExamples(url: string, method: string, price: string) {
  const curl = `curl -i -X ${method} '${url}'`;
  const agent = [
    "import { createAgent } from '@paygate/agent-client';",
    '',
    `const agent = createAgent({ wallet, maxPricePerCall: '${price}' });`,
    `const response = await agent.fetch('${url}', { method: '${method}' });`,
    'console.log(response.status, await response.text());',
  ].join('\n');
  return { curl, agent };
}
