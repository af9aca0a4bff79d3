import { type AnyRoute, conflict, defineRoute, notFound } from '@paygate/http';
import type { Request } from 'express';
import type { Transaction } from 'kysely';
import { currentSeller } from '../../auth/authenticate';
import type { HttpMethod, RegistryDatabase } from '../../db';
import { refusal } from '../../errors';
import { RegistryReason } from '../../reasons';
import { idempotent } from '../../shared/idempotency';
import { NoBody } from '../../shared/schema';
import {
  commitSkillChange,
  type EndpointRow,
  insertEndpoint,
  regenerateSkillMd,
  type SkillWithEndpoints,
} from '../repository';
import {
  checkEndpointInput,
  checkEndpointPath,
  type EndpointInput,
  parsePrice,
  refuseAmbiguousPath,
} from '../rules';
import {
  EndpointCreate,
  EndpointPatch,
  MAX_ENDPOINT_ROWS_PER_SKILL,
  MAX_ENDPOINTS_PER_SKILL,
  Skill,
} from '../schemas';
import { applySkillTransition, type SkillTransition, skillTransition } from '../status';
import { EndpointParams, endpointIdParam, idempotencyKey, NameParams, type SkillRouteKit } from './kit';

/** An endpoint's method and path are unique among the skill's other active endpoints, and not ambiguous with theirs. */
function refuseClashingRoute(others: EndpointRow[], candidate: { method: string; path: string }): void {
  const { method, path } = candidate;
  if (others.some((e) => e.method === method && e.path === path)) {
    const message = `${method} ${path} already exists on this skill`;
    const rule = 'must be unique per method within the skill';
    throw refusal(409, RegistryReason.EndpointExists, message, rule, 'path');
  }
  refuseAmbiguousPath('path', candidate, others);
}

/** After an endpoint changes: the status move `endpoints_changed`, SKILL.md regenerated, and the new revision. */
async function afterEndpointChange(
  trx: Transaction<RegistryDatabase>,
  state: SkillWithEndpoints,
  transition: SkillTransition,
  publicBaseUrl: string,
  now: Date,
) {
  await applySkillTransition(trx, state.skill.id, transition);
  // Endpoint changes always regenerate SKILL.md, replacing a hand edit.
  await regenerateSkillMd(trx, state.skill.id, publicBaseUrl);
  return commitSkillChange(trx, state.skill.id, now);
}

/** The seller's skill (locked) and its endpoint named in the path, with the move an endpoint change makes. */
async function ownedEndpoint(
  kit: SkillRouteKit,
  trx: Transaction<RegistryDatabase>,
  req: Request,
  endpointId: string,
) {
  const current = await kit.ownedSkill(trx, req);
  const transition = skillTransition(current.skill.status, 'endpoints_changed');
  const endpoint = current.endpoints.find((e) => e.id === endpointId);
  if (!endpoint) throw notFound('endpoint');
  return { current, transition, endpoint };
}

/** Adds the endpoint to the seller's skill named in the path: at most MAX_ENDPOINTS_PER_SKILL active, routes unique. */
async function addEndpoint(
  kit: SkillRouteKit,
  trx: Transaction<RegistryDatabase>,
  req: Request,
  input: EndpointInput,
  now: Date,
) {
  const current = await kit.ownedSkill(trx, req);
  const transition = skillTransition(current.skill.status, 'endpoints_changed');
  const active = current.endpoints.filter((e) => e.active);
  if (active.length >= MAX_ENDPOINTS_PER_SKILL) {
    const message = `a skill has at most ${MAX_ENDPOINTS_PER_SKILL} active endpoints`;
    const rule = `at most ${MAX_ENDPOINTS_PER_SKILL}`;
    throw refusal(409, RegistryReason.TooManyEndpoints, message, rule, 'endpoints');
  }
  // Deactivated endpoints stay in the skill (and in every skill.updated): their number is bounded too.
  if (current.endpoints.length >= MAX_ENDPOINT_ROWS_PER_SKILL) {
    const message = `a skill keeps at most ${MAX_ENDPOINT_ROWS_PER_SKILL} endpoints, deactivated ones included; create another skill`;
    const rule = `at most ${MAX_ENDPOINT_ROWS_PER_SKILL} in all`;
    throw refusal(409, RegistryReason.TooManyEndpoints, message, rule, 'endpoints');
  }
  refuseClashingRoute(active, input);
  await insertEndpoint(trx, current.skill.id, input, now);
  return afterEndpointChange(trx, current, transition, kit.base, now);
}

/** Changes an active endpoint of the seller's skill (409 endpoint_inactive); its route stays unique. */
async function changeEndpoint(
  kit: SkillRouteKit,
  trx: Transaction<RegistryDatabase>,
  req: Request,
  endpointId: string,
  change: { method?: HttpMethod; path?: string; description?: string; priceMicro?: bigint },
  now: Date,
) {
  const { current, transition, endpoint } = await ownedEndpoint(kit, trx, req, endpointId);
  if (!endpoint.active)
    throw conflict(RegistryReason.EndpointInactive, 'the endpoint is deactivated; add a new one instead');
  const method = change.method ?? endpoint.method;
  const nextPath = change.path ?? endpoint.path;
  const others = current.endpoints.filter((e) => e.active && e.id !== endpoint.id);
  refuseClashingRoute(others, { path: nextPath, method });
  await trx
    .updateTable('endpoints')
    .set({
      path: nextPath,
      method,
      description: change.description, // undefined: unchanged
      price_micro: change.priceMicro,
      updated_at: now,
    })
    .where('id', '=', endpoint.id)
    .execute();
  return afterEndpointChange(trx, current, transition, kit.base, now);
}

export function addEndpointRoute(kit: SkillRouteKit): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/manage/skills/:name/endpoints',
    summary: 'Add an endpoint (SKILL.md is regenerated)',
    auth: kit.auth,
    params: NameParams,
    body: EndpointCreate,
    headers: [idempotencyKey],
    responses: { '201': Skill },
    errors: {
      '404': 'no such skill of this seller',
      '409': 'skill_archived, too_many_endpoints, endpoint_exists or idempotency_key_reused',
    },
    handler: async (req, res) => {
      const input = checkEndpointInput('', req.body);
      await idempotent(kit.rc.ctx.db, req, res, currentSeller(req).id, async () => {
        const skill = await kit.change((trx, now) => addEndpoint(kit, trx, req, input, now));
        return { status: 201, body: skill };
      });
    },
  });
}

export function patchEndpointRoute(kit: SkillRouteKit): AnyRoute {
  return defineRoute({
    method: 'patch',
    path: '/api/v1/manage/skills/:name/endpoints/:endpointId',
    summary: 'Change an endpoint (SKILL.md is regenerated)',
    auth: kit.auth,
    params: EndpointParams,
    body: EndpointPatch,
    responses: { '200': Skill },
    errors: {
      '404': 'no such skill or endpoint',
      '409': 'skill_archived, endpoint_inactive or endpoint_exists',
    },
    handler: async (req, res) => {
      const body = req.body;
      const endpointId = endpointIdParam(req);
      const path = body.path === undefined ? undefined : checkEndpointPath('path', body.path);
      const priceMicro = body.priceUsdc === undefined ? undefined : parsePrice('priceUsdc', body.priceUsdc);
      const change = { ...body, path, priceMicro };
      res.json(await kit.change((trx, now) => changeEndpoint(kit, trx, req, endpointId, change, now)));
    },
  });
}

export function deactivateEndpointRoute(kit: SkillRouteKit): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/manage/skills/:name/endpoints/:endpointId/deactivate',
    summary: 'Deactivate an endpoint (SKILL.md is regenerated)',
    auth: kit.auth,
    params: EndpointParams,
    ...NoBody,
    responses: { '200': Skill },
    errors: { '404': 'no such skill or endpoint', '409': 'skill_archived' },
    handler: async (req, res) => {
      const endpointId = endpointIdParam(req);
      const skill = await kit.change(async (trx, now) => {
        const { current, transition, endpoint } = await ownedEndpoint(kit, trx, req, endpointId);
        if (!endpoint.active) return current;
        await trx
          .updateTable('endpoints')
          .set({ active: false, updated_at: now })
          .where('id', '=', endpoint.id)
          .execute();
        return afterEndpointChange(trx, current, transition, kit.base, now);
      });
      res.json(skill);
    },
  });
}
