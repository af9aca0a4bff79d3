import {
  type AnyRoute,
  conflict,
  defineRoute,
  HttpError,
  idempotencyKeyParameter,
  notFound,
} from '@paygate/http';
import { Type } from '@sinclair/typebox';
import type { Request } from 'express';
import { sql, type Transaction } from 'kysely';
import { currentSeller, operatorRouteAuth, sellerRouteAuth } from '../auth/authenticate';
import type { RegistryContext } from '../context';
import type { RegistryDatabase, SkillStatus } from '../db';
import { idempotent } from '../shared/idempotency';
import { EmptyBody } from '../shared/schema';
import { newId } from '../shared/secrets';
import { checkSellerUrl } from '../shared/urls';
import {
  commitSkillChange,
  loadEndpoints,
  loadSkill,
  regenerateSkillMd,
  type SkillWithEndpoints,
  toCatalogSkill,
  toSkill,
} from './repository';
import {
  checkEndpointInput,
  checkEndpointPath,
  checkTypeFields,
  defaultHoldHours,
  normalizeCategories,
  parsePrice,
  refuseAmbiguousPath,
  refuseAmbiguousPaths,
  refuseDuplicateRoutes,
} from './rules';
import {
  Catalog,
  EndpointCreate,
  EndpointPatch,
  ListQuery,
  MAX_ENDPOINTS_PER_SKILL,
  Skill,
  SkillCreate,
  SkillList,
  SkillMdReplace,
  SkillPatch,
  SuspendBody,
} from './schemas';
import { acceptManualSkillMd, skillMdVersion } from './skill-md';

export interface ValidationKicker {
  kick(): void;
}

const NAME_PARAM = /^[a-z0-9]+(-[a-z0-9]+)*$/;

// Path values are checked by the handlers (nameParam, endpointIdParam): one that names nothing is 404.
const SkillNameParam = Type.String({ description: 'the skill name (kebab-case); any other value is 404' });
const NameParams = Type.Object({ name: SkillNameParam });
const EndpointParams = Type.Object({ name: SkillNameParam, endpointId: Type.String() });
const idempotencyKey = idempotencyKeyParameter(
  'the same key with the same request replays the stored response',
);
const skillMdResponse = { description: 'SKILL.md', contentType: 'text/markdown', schema: { type: 'string' } };

function nameParam(req: Request): string {
  const name = String(req.params.name ?? '');
  if (name.length > 64 || !NAME_PARAM.test(name)) throw notFound('skill');
  return name;
}

function endpointIdParam(req: Request): string {
  const id = String(req.params.endpointId ?? '');
  if (id.length > 64) throw notFound('endpoint');
  return id;
}

const archived = () => conflict('skill_archived', 'the skill is archived; archived skills cannot be changed');

function encodeCursor(name: string): string {
  return Buffer.from(name, 'utf8').toString('base64url');
}
function decodeCursor(cursor: string | undefined): string | undefined {
  if (!cursor) return undefined;
  const name = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!NAME_PARAM.test(name))
    throw new HttpError(400, 'invalid_request', 'cursor is invalid', {
      field: 'cursor',
      rule: 'must be a nextCursor from a previous page',
    });
  return name;
}

/** Validation runs again: status PENDING_VALIDATION, a new validation sequence (any run in flight is discarded). */
async function requeueValidation(trx: Transaction<RegistryDatabase>, skillId: string) {
  await trx
    .updateTable('skills')
    .set((eb) => ({
      status: 'PENDING_VALIDATION' as SkillStatus,
      status_reason: null,
      validation_seq: eb('validation_seq', '+', 1),
      validation_lease_until: null,
    }))
    .where('id', '=', skillId)
    .execute();
}

/** After an endpoint changes: a skill not yet live is validated again; a live one gets an early health ping. */
async function afterEndpointChange(
  trx: Transaction<RegistryDatabase>,
  state: SkillWithEndpoints,
  publicBaseUrl: string,
) {
  const { status, id } = state.skill;
  if (status === 'PENDING_VALIDATION' || status === 'VALIDATION_FAILED') await requeueValidation(trx, id);
  if (status === 'ACTIVE')
    await trx.updateTable('skills').set({ health_checked_at: null }).where('id', '=', id).execute();
  // Endpoint changes always regenerate SKILL.md, replacing a hand edit (documented in the README).
  await regenerateSkillMd(trx, id, publicBaseUrl);
}

/** The seller's skills and endpoints, the operator's suspensions and the public catalog. */
export function skillRoutes(rc: RegistryContext, validation: ValidationKicker): AnyRoute[] {
  const { ctx, config } = rc;
  const auth = sellerRouteAuth(rc);
  const operator = operatorRouteAuth(rc);
  const base = config.publicBaseUrl;
  const render = (state: SkillWithEndpoints) => toSkill(base, state);

  async function ownedSkill(trx: Transaction<RegistryDatabase>, req: Request): Promise<SkillWithEndpoints> {
    const state = await loadSkill(
      trx,
      { name: nameParam(req), sellerId: currentSeller(req).id },
      { forUpdate: true },
    );
    if (!state) throw notFound('skill');
    return state;
  }

  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/manage/skills',
      summary: 'Create a skill (PENDING_VALIDATION, validated in the background)',
      auth,
      body: SkillCreate,
      headers: [idempotencyKey],
      responses: { '201': Skill },
      errors: { '409': 'skill_name_taken or idempotency_key_reused' },
      handler: async (req, res) => {
        const body = req.body;
        const seller = currentSeller(req);
        const apiBaseUrl = await checkSellerUrl('apiBaseUrl', body.apiBaseUrl, {
          production: config.production,
          resolve: rc.resolveHost,
        });
        const typeFields = checkTypeFields({
          type: body.type,
          durationDays: body.durationDays ?? null,
          requiresShipping: body.requiresShipping ?? null,
          holdPeriodHours: body.holdPeriodHours ?? defaultHoldHours(body.type),
        });
        const categories = normalizeCategories(body.categories);
        const endpoints = (body.endpoints ?? []).map((e, i) => checkEndpointInput(`endpoints.${i}.`, e));
        refuseDuplicateRoutes(endpoints);
        refuseAmbiguousPaths(endpoints);

        await idempotent(ctx.db, req, res, seller.id, async () => {
          const now = config.now();
          const state = await ctx.inTransaction(async (trx) => {
            const skillId = newId('skl');
            const inserted = await trx
              .insertInto('skills')
              .values({
                id: skillId,
                seller_id: seller.id,
                name: body.name,
                display_name: body.displayName,
                description: body.description,
                api_base_url: apiBaseUrl,
                mode: body.mode ?? 'PROXY',
                type: typeFields.type,
                categories,
                duration_days: typeFields.durationDays,
                requires_shipping: typeFields.requiresShipping,
                hold_period_hours: typeFields.holdPeriodHours,
                status: 'PENDING_VALIDATION',
                status_reason: null,
                validation_lease_until: null,
                health_checked_at: null,
                created_at: now,
                updated_at: now,
              })
              .onConflict((oc) => oc.column('name').doNothing())
              .returning('id')
              .executeTakeFirst();
            if (!inserted) {
              throw new HttpError(409, 'skill_name_taken', `a skill named ${body.name} already exists`, {
                field: 'name',
                rule: 'must be unique',
              });
            }
            for (const e of endpoints) {
              await trx
                .insertInto('endpoints')
                .values({
                  id: newId('ep'),
                  skill_id: skillId,
                  path: e.path,
                  method: e.method,
                  description: e.description,
                  price_micro: e.priceMicro,
                  created_at: now,
                  updated_at: now,
                })
                .execute();
            }
            await regenerateSkillMd(trx, skillId, base);
            return commitSkillChange(trx, skillId, now);
          });
          validation.kick();
          return { status: 201, body: render(state) };
        });
      },
    }),

    defineRoute({
      method: 'get',
      path: '/api/v1/manage/skills',
      summary: "List the seller's skills (every status)",
      auth,
      query: ListQuery,
      responses: { '200': SkillList },
      handler: async (req, res) => {
        const query = req.query;
        const limit = Number(query.limit ?? 20);
        const after = decodeCursor(query.cursor);
        let select = ctx.db.selectFrom('skills').selectAll().where('seller_id', '=', currentSeller(req).id);
        if (after) select = select.where('name', '>', after);
        const rows = await select
          .orderBy('name')
          .limit(limit + 1)
          .execute();
        const page = rows.slice(0, limit);
        const endpoints = await loadEndpoints(
          ctx.db,
          page.map((r) => r.id),
        );
        res.json({
          data: page.map((skill) => render({ skill, endpoints: endpoints.get(skill.id) ?? [] })),
          nextCursor: rows.length > limit ? encodeCursor(page[page.length - 1]!.name) : null,
        });
      },
    }),

    defineRoute({
      method: 'get',
      path: '/api/v1/manage/skills/:name',
      summary: 'One skill with its endpoints',
      auth,
      params: NameParams,
      responses: { '200': Skill },
      errors: { '404': 'no such skill of this seller' },
      handler: async (req, res) => {
        const state = await loadSkill(ctx.db, { name: nameParam(req), sellerId: currentSeller(req).id });
        if (!state) throw notFound('skill');
        res.json(render(state));
      },
    }),

    defineRoute({
      method: 'get',
      path: '/api/v1/manage/skills/:name/skill-md',
      summary: 'The current SKILL.md of the skill, whatever its status',
      auth,
      params: NameParams,
      responses: { '200': skillMdResponse },
      errors: { '404': 'no such skill of this seller' },
      handler: async (req, res) => {
        const state = await loadSkill(ctx.db, { name: nameParam(req), sellerId: currentSeller(req).id });
        if (!state) throw notFound('skill');
        res.type('text/markdown; charset=utf-8').send(state.skill.skill_md);
      },
    }),

    defineRoute({
      method: 'patch',
      path: '/api/v1/manage/skills/:name',
      summary: 'Change a skill (name is immutable); a new apiBaseUrl is validated again',
      auth,
      params: NameParams,
      body: SkillPatch,
      responses: { '200': Skill },
      errors: { '404': 'no such skill of this seller', '409': 'skill_archived' },
      handler: async (req, res) => {
        const body = req.body;
        const apiBaseUrl =
          body.apiBaseUrl === undefined
            ? undefined
            : await checkSellerUrl('apiBaseUrl', body.apiBaseUrl, {
                production: config.production,
                resolve: rc.resolveHost,
              });
        const categories = body.categories === undefined ? undefined : normalizeCategories(body.categories);
        const now = config.now();
        const state = await ctx.inTransaction(async (trx) => {
          const { skill } = await ownedSkill(trx, req);
          if (skill.status === 'ARCHIVED') throw archived();
          const type = body.type ?? skill.type;
          const typeChanged = type !== skill.type;
          const keepHoldDefault = typeChanged && skill.hold_period_hours === defaultHoldHours(skill.type);
          const typeFields = checkTypeFields({
            type,
            // A field the new type does not use is dropped unless the request sets it.
            durationDays:
              body.durationDays !== undefined
                ? body.durationDays
                : typeChanged && type !== 'SaaS' && type !== 'Subscription'
                  ? null
                  : skill.duration_days,
            requiresShipping:
              body.requiresShipping !== undefined
                ? body.requiresShipping
                : typeChanged && type !== 'Product'
                  ? null
                  : skill.requires_shipping,
            holdPeriodHours:
              body.holdPeriodHours ?? (keepHoldDefault ? defaultHoldHours(type) : skill.hold_period_hours),
          });
          await trx
            .updateTable('skills')
            .set({
              ...(body.displayName !== undefined ? { display_name: body.displayName } : {}),
              ...(body.description !== undefined ? { description: body.description } : {}),
              ...(apiBaseUrl !== undefined ? { api_base_url: apiBaseUrl } : {}),
              ...(body.mode !== undefined ? { mode: body.mode } : {}),
              ...(categories !== undefined ? { categories } : {}),
              type: typeFields.type,
              duration_days: typeFields.durationDays,
              requires_shipping: typeFields.requiresShipping,
              hold_period_hours: typeFields.holdPeriodHours,
            })
            .where('id', '=', skill.id)
            .execute();
          // A new base URL is where paid traffic goes: it is validated again before the skill is payable.
          if (
            apiBaseUrl !== undefined &&
            apiBaseUrl !== skill.api_base_url &&
            ['ACTIVE', 'PENDING_VALIDATION', 'VALIDATION_FAILED'].includes(skill.status)
          ) {
            await requeueValidation(trx, skill.id);
          }
          if (skill.skill_md_source === 'generated') await regenerateSkillMd(trx, skill.id, base);
          return commitSkillChange(trx, skill.id, now);
        });
        validation.kick();
        res.json(render(state));
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/manage/skills/:name/archive',
      summary: 'Archive the skill (final)',
      auth,
      params: NameParams,
      body: EmptyBody,
      bodyOptional: true,
      responses: { '200': Skill },
      errors: { '404': 'no such skill of this seller', '409': 'skill_suspended' },
      handler: async (req, res) => {
        const now = config.now();
        const state = await ctx.inTransaction(async (trx) => {
          const current = await ownedSkill(trx, req);
          if (current.skill.status === 'ARCHIVED') return current;
          if (current.skill.status === 'SUSPENDED')
            throw conflict('skill_suspended', 'a suspended skill cannot be archived; contact support');
          await trx
            .updateTable('skills')
            .set({ status: 'ARCHIVED', status_reason: null, validation_lease_until: null })
            .where('id', '=', current.skill.id)
            .execute();
          return commitSkillChange(trx, current.skill.id, now);
        });
        res.json(render(state));
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/manage/skills/:name/validate',
      summary: 'Retry validation of a VALIDATION_FAILED skill',
      auth,
      params: NameParams,
      body: EmptyBody,
      bodyOptional: true,
      responses: { '202': Skill },
      errors: {
        '404': 'no such skill of this seller',
        '409': 'invalid_state: the skill is not VALIDATION_FAILED',
      },
      handler: async (req, res) => {
        const now = config.now();
        const state = await ctx.inTransaction(async (trx) => {
          const current = await ownedSkill(trx, req);
          if (current.skill.status === 'PENDING_VALIDATION') return current;
          if (current.skill.status !== 'VALIDATION_FAILED') {
            throw new HttpError(
              409,
              'invalid_state',
              `only a skill in VALIDATION_FAILED can be validated again (status is ${current.skill.status})`,
            );
          }
          await requeueValidation(trx, current.skill.id);
          return commitSkillChange(trx, current.skill.id, now);
        });
        validation.kick();
        res.status(202).json(render(state));
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/manage/skills/:name/endpoints',
      summary: 'Add an endpoint (SKILL.md is regenerated)',
      auth,
      params: NameParams,
      body: EndpointCreate,
      headers: [idempotencyKey],
      responses: { '201': Skill },
      errors: {
        '404': 'no such skill of this seller',
        '409': 'skill_archived, too_many_endpoints, endpoint_exists or idempotency_key_reused',
      },
      handler: async (req, res) => {
        const body = req.body;
        const input = checkEndpointInput('', body);
        const seller = currentSeller(req);
        await idempotent(ctx.db, req, res, seller.id, async () => {
          const now = config.now();
          const state = await ctx.inTransaction(async (trx) => {
            const current = await ownedSkill(trx, req);
            if (current.skill.status === 'ARCHIVED') throw archived();
            const active = current.endpoints.filter((e) => e.active);
            if (active.length >= MAX_ENDPOINTS_PER_SKILL) {
              throw new HttpError(
                409,
                'too_many_endpoints',
                `a skill has at most ${MAX_ENDPOINTS_PER_SKILL} active endpoints`,
                { field: 'endpoints', rule: `at most ${MAX_ENDPOINTS_PER_SKILL}` },
              );
            }
            if (active.some((e) => e.method === input.method && e.path === input.path)) {
              throw new HttpError(
                409,
                'endpoint_exists',
                `${input.method} ${input.path} already exists on this skill`,
                { field: 'path', rule: 'must be unique per method within the skill' },
              );
            }
            refuseAmbiguousPath('path', input, active);
            await trx
              .insertInto('endpoints')
              .values({
                id: newId('ep'),
                skill_id: current.skill.id,
                path: input.path,
                method: input.method,
                description: input.description,
                price_micro: input.priceMicro,
                created_at: now,
                updated_at: now,
              })
              .execute();
            await afterEndpointChange(trx, current, base);
            return commitSkillChange(trx, current.skill.id, now);
          });
          validation.kick();
          return { status: 201, body: render(state) };
        });
      },
    }),

    defineRoute({
      method: 'patch',
      path: '/api/v1/manage/skills/:name/endpoints/:endpointId',
      summary: 'Change an endpoint (SKILL.md is regenerated)',
      auth,
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
        const now = config.now();
        const state = await ctx.inTransaction(async (trx) => {
          const current = await ownedSkill(trx, req);
          if (current.skill.status === 'ARCHIVED') throw archived();
          const endpoint = current.endpoints.find((e) => e.id === endpointId);
          if (!endpoint) throw notFound('endpoint');
          if (!endpoint.active)
            throw conflict('endpoint_inactive', 'the endpoint is deactivated; add a new one instead');
          const method = body.method ?? endpoint.method;
          const nextPath = path ?? endpoint.path;
          if (
            current.endpoints.some(
              (e) => e.active && e.id !== endpoint.id && e.method === method && e.path === nextPath,
            )
          ) {
            throw new HttpError(
              409,
              'endpoint_exists',
              `${method} ${nextPath} already exists on this skill`,
              {
                field: 'path',
                rule: 'must be unique per method within the skill',
              },
            );
          }
          refuseAmbiguousPath(
            'path',
            { path: nextPath, method },
            current.endpoints.filter((e) => e.active && e.id !== endpoint.id),
          );
          await trx
            .updateTable('endpoints')
            .set({
              path: nextPath,
              method,
              ...(body.description !== undefined ? { description: body.description } : {}),
              ...(priceMicro !== undefined ? { price_micro: priceMicro } : {}),
              updated_at: now,
            })
            .where('id', '=', endpoint.id)
            .execute();
          await afterEndpointChange(trx, current, base);
          return commitSkillChange(trx, current.skill.id, now);
        });
        validation.kick();
        res.json(render(state));
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/manage/skills/:name/endpoints/:endpointId/deactivate',
      summary: 'Deactivate an endpoint (SKILL.md is regenerated)',
      auth,
      params: EndpointParams,
      body: EmptyBody,
      bodyOptional: true,
      responses: { '200': Skill },
      errors: { '404': 'no such skill or endpoint', '409': 'skill_archived' },
      handler: async (req, res) => {
        const endpointId = endpointIdParam(req);
        const now = config.now();
        const state = await ctx.inTransaction(async (trx) => {
          const current = await ownedSkill(trx, req);
          if (current.skill.status === 'ARCHIVED') throw archived();
          const endpoint = current.endpoints.find((e) => e.id === endpointId);
          if (!endpoint) throw notFound('endpoint');
          if (!endpoint.active) return current;
          await trx
            .updateTable('endpoints')
            .set({ active: false, updated_at: now })
            .where('id', '=', endpoint.id)
            .execute();
          await afterEndpointChange(trx, current, base);
          return commitSkillChange(trx, current.skill.id, now);
        });
        validation.kick();
        res.json(render(state));
      },
    }),

    defineRoute({
      method: 'put',
      path: '/api/v1/manage/skills/:name/skill-md',
      summary: 'Replace SKILL.md by hand. A later endpoint change regenerates it and replaces the hand edit.',
      auth,
      params: NameParams,
      body: SkillMdReplace,
      responses: { '200': Skill },
      errors: { '404': 'no such skill of this seller', '409': 'skill_archived' },
      handler: async (req, res) => {
        const body = req.body;
        const state = await ctx.inTransaction(async (trx) => {
          const current = await ownedSkill(trx, req);
          if (current.skill.status === 'ARCHIVED') throw archived();
          const version = current.skill.skill_md_version + 1;
          const accepted = acceptManualSkillMd(body.content, current.skill.name, skillMdVersion(version));
          if ('rule' in accepted)
            throw new HttpError(400, 'invalid_request', `${accepted.field} ${accepted.rule}`, accepted);
          await trx
            .updateTable('skills')
            .set({ skill_md: accepted.content, skill_md_version: version, skill_md_source: 'manual' })
            .where('id', '=', current.skill.id)
            .execute();
          return loadSkill(trx, { id: current.skill.id });
        });
        res.json(render(state!));
      },
    }),

    // Operator actions (policy violations): suspension and its reversal.
    defineRoute({
      method: 'post',
      path: '/api/v1/operator/skills/:name/suspend',
      summary: 'Operator: suspend a skill',
      auth: operator,
      params: NameParams,
      body: SuspendBody,
      bodyOptional: true,
      responses: { '200': Skill },
      errors: { '404': 'no such skill', '409': 'skill_archived' },
      handler: async (req, res) => {
        const reason = req.body.reason ?? 'suspended by an operator';
        const now = config.now();
        const state = await ctx.inTransaction(async (trx) => {
          const current = await loadSkill(trx, { name: nameParam(req) }, { forUpdate: true });
          if (!current) throw notFound('skill');
          if (current.skill.status === 'SUSPENDED') return current;
          if (current.skill.status === 'ARCHIVED') throw archived();
          await trx
            .updateTable('skills')
            .set({ status: 'SUSPENDED', status_reason: reason, validation_lease_until: null })
            .where('id', '=', current.skill.id)
            .execute();
          return commitSkillChange(trx, current.skill.id, now);
        });
        res.json(render(state));
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/operator/skills/:name/unsuspend',
      summary: 'Operator: lift a suspension (the skill is validated again)',
      auth: operator,
      params: NameParams,
      body: EmptyBody,
      bodyOptional: true,
      responses: { '200': Skill },
      errors: { '404': 'no such skill', '409': 'invalid_state: the skill is not SUSPENDED' },
      handler: async (req, res) => {
        const now = config.now();
        const state = await ctx.inTransaction(async (trx) => {
          const current = await loadSkill(trx, { name: nameParam(req) }, { forUpdate: true });
          if (!current) throw notFound('skill');
          if (current.skill.status !== 'SUSPENDED')
            throw new HttpError(409, 'invalid_state', `the skill is ${current.skill.status}, not SUSPENDED`);
          // A lifted suspension is validated again before the skill can be paid for.
          await requeueValidation(trx, current.skill.id);
          return commitSkillChange(trx, current.skill.id, now);
        });
        validation.kick();
        res.json(render(state));
      },
    }),

    // Public discovery.
    defineRoute({
      method: 'get',
      path: '/api/v1/skills',
      summary: 'Public catalog of ACTIVE skills, filterable by category and text, paginated',
      query: ListQuery,
      responses: { '200': Catalog },
      handler: async (req, res) => {
        const query = req.query;
        const limit = Number(query.limit ?? 20);
        const after = decodeCursor(query.cursor);
        let select = ctx.db.selectFrom('skills').selectAll().where('status', '=', 'ACTIVE');
        if (query.category)
          select = select.where(sql<boolean>`${query.category.trim().toLowerCase()} = any(categories)`);
        if (query.q?.trim()) {
          const pattern = `%${query.q.trim().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
          select = select.where((eb) =>
            eb.or([
              eb('name', 'ilike', pattern),
              eb('display_name', 'ilike', pattern),
              eb('description', 'ilike', pattern),
            ]),
          );
        }
        if (after) select = select.where('name', '>', after);
        const rows = await select
          .orderBy('name')
          .limit(limit + 1)
          .execute();
        const page = rows.slice(0, limit);
        const endpoints = await loadEndpoints(
          ctx.db,
          page.map((r) => r.id),
        );
        res.json({
          data: page.map((skill) =>
            toCatalogSkill(base, { skill, endpoints: endpoints.get(skill.id) ?? [] }),
          ),
          nextCursor: rows.length > limit ? encodeCursor(page[page.length - 1]!.name) : null,
        });
      },
    }),

    defineRoute({
      method: 'get',
      path: '/api/v1/skills/:name/SKILL.md',
      summary: 'Public SKILL.md of an ACTIVE skill',
      params: NameParams,
      responses: { '200': skillMdResponse },
      errors: { '404': 'no ACTIVE skill of this name' },
      handler: async (req, res) => {
        const state = await loadSkill(ctx.db, { name: nameParam(req) });
        if (!state) throw notFound('skill');
        if (state.skill.status !== 'ACTIVE') throw notFound('skill');
        res.setHeader('cache-control', 'public, max-age=60');
        res.type('text/markdown; charset=utf-8').send(state.skill.skill_md);
      },
    }),
  ];
}
