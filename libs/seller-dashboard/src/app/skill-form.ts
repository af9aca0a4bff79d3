import { DEFAULT_HOLD_HOURS } from '@paygate/contracts/holds';

import type { HttpMethod, Skill, SkillType } from './types';

export const SKILL_TYPES: SkillType[] = ['API', 'SaaS', 'Product', 'Service', 'Subscription', 'Content'];
export const METHODS: HttpMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

export const usesDuration = (type: SkillType) => type === 'SaaS' || type === 'Subscription';
export const usesShipping = (type: SkillType) => type === 'Product';

export interface EndpointDraft {
  endpointId?: string;
  path: string;
  method: HttpMethod;
  priceUsdc: string;
  description: string;
}

/** The skill's own text fields as they are; the rest as typed (numbers and lists still text). */
export interface SkillDraft
  extends Pick<Skill, 'name' | 'displayName' | 'description' | 'apiBaseUrl' | 'type' | 'mode'> {
  categories: string;
  durationDays: string;
  requiresShipping: boolean;
  /** Empty means "the type's default". */
  holdPeriodHours: string;
  endpoints: EndpointDraft[];
}

/** A new endpoint's fields before the seller changes them. */
export const BLANK_ENDPOINT: EndpointDraft = { path: '/', method: 'GET', priceUsdc: '0.01', description: '' };

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
    endpoints: [BLANK_ENDPOINT],
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

/** The body of the skill's POST (`forUpdate`: its PATCH); values sent as typed (the API names its rule). */
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

const SKILL_NAME = /^[a-z0-9]+(-[a-z0-9]+)*$/;
const ENDPOINT_PATH =
  /^\/(([A-Za-z0-9._~-]+|:[A-Za-z_][A-Za-z0-9_]*)(\/([A-Za-z0-9._~-]+|:[A-Za-z_][A-Za-z0-9_]*))*\/?)?$/;
const PRICE = /^(0|[1-9]\d*)(\.\d{1,6})?$/;

/** Every rule of the registry's skill schema the form can check before sending, keyed like the API's errors. */
export function validateSkillDraft(draft: SkillDraft, options: { editing: boolean }): Record<string, string> {
  const errors: Record<string, string> = {};
  const displayName = draft.displayName.trim();
  if (!displayName) errors.displayName = 'Display name is required';
  else if (displayName.length > 120) errors.displayName = 'Display name must be at most 120 characters';
  if (!options.editing) {
    if (!draft.name) errors.name = 'Name is required';
    else if (draft.name.length < 2 || draft.name.length > 64) errors.name = 'Name must be 2 to 64 characters';
    else if (!SKILL_NAME.test(draft.name))
      errors.name = 'Name must be lowercase letters and digits separated by single hyphens';
  }
  const description = draft.description.trim();
  if (!description) errors.description = 'Description is required';
  else if (description.length < 10)
    errors.description = `Description needs at least 10 characters (it has ${description.length})`;
  else if (description.length > 5000) errors.description = 'Description must be at most 5,000 characters';
  if (!/^https?:\/\/[^/\s]+/.test(draft.apiBaseUrl.trim()))
    errors.apiBaseUrl =
      'API base URL must be a web address starting with https:// (http:// only in development)';
  if (usesDuration(draft.type) && !/^\d+$/.test(draft.durationDays.trim()))
    errors.durationDays = `Access duration is required for ${draft.type}: whole days, 1 to 3650`;
  const hold = draft.holdPeriodHours.trim();
  if (hold && !(/^\d+$/.test(hold) && Number(hold) <= 168))
    errors.holdPeriodHours = 'Hold period must be whole hours from 0 to 168, or empty for the default';
  if (!options.editing) {
    draft.endpoints.forEach((endpoint, i) => {
      if (!ENDPOINT_PATH.test(endpoint.path.trim()))
        errors[`endpoints.${i}.path`] =
          `Endpoint ${i + 1} path must start with / and contain only URL path segments`;
      if (!PRICE.test(endpoint.priceUsdc.trim()) || /^0(\.0+)?$/.test(endpoint.priceUsdc.trim()))
        errors[`endpoints.${i}.priceUsdc`] =
          `Endpoint ${i + 1} price must be an amount of USDC above 0 with at most 6 decimals`;
    });
  }
  return errors;
}

/** The form control of a field error key (the first invalid one gets the focus). */
export function skillFieldId(key: string): string {
  const endpoint = /^endpoints\.(\d+)\.(\w+)$/.exec(key);
  if (endpoint) return `ep${endpoint[1]}-${endpoint[2] === 'priceUsdc' ? 'price' : endpoint[2]}`;
  return `skill-${key}`;
}
