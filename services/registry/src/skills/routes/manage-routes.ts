import { type AnyRoute, badRequest, defineRoute } from '@paygate/http';
import type { Static } from '@sinclair/typebox';
import type { Request } from 'express';
import type { Transaction } from 'kysely';
import { currentSeller } from '../../auth/authenticate';
import type { RegistryDatabase, SkillType } from '../../db';
import { refusal } from '../../errors';
import { RegistryReason } from '../../reasons';
import { idempotent } from '../../shared/idempotency';
import { newId } from '../../shared/secrets';
import { checkSellerUrl } from '../../shared/urls';
import {
  commitSkillChange,
  insertEndpoint,
  loadSkill,
  regenerateSkillMd,
  type SkillRow,
} from '../repository';
import {
  checkEndpointInput,
  checkTypeFields,
  defaultHoldHours,
  normalizeCategories,
  refuseAmbiguousPaths,
  refuseDuplicateRoutes,
  type TypeFields,
} from '../rules';
import { ListQuery, Skill, SkillCreate, SkillList, SkillMdReplace, SkillPatch } from '../schemas';
import { acceptManualSkillMd, skillMdVersion } from '../skill-md';
import { applySkillTransition, skillTransition } from '../status';
import { idempotencyKey, NameParams, type SkillRouteKit, skillMdResponse, skillPage } from './kit';

type NewSkill = Awaited<ReturnType<typeof checkNewSkill>>;

/**
 * Refuses a seller's skill past `maxSkills` (409 skill_limit_reached). The seller's row is locked first, so that
 * concurrent creations by one seller are counted one after the other.
 */
async function refuseSkillOverLimit(trx: Transaction<RegistryDatabase>, sellerId: string, maxSkills: number) {
  await trx
    .selectFrom('sellers')
    .select('id')
    .where('id', '=', sellerId)
    .forUpdate()
    .executeTakeFirstOrThrow();
  const { held } = await trx
    .selectFrom('skills')
    .select((eb) => eb.fn.countAll<string>().as('held'))
    .where('seller_id', '=', sellerId)
    .executeTakeFirstOrThrow();
  if (Number(held) >= maxSkills) {
    const message = `a seller holds at most ${maxSkills} skills, archived ones included; ask the operator for more`;
    const rule = `at most ${maxSkills} skills per seller`;
    throw refusal(409, RegistryReason.SkillLimitReached, message, rule, 'name');
  }
}

/** Inserts a skill (PENDING_VALIDATION) with its endpoints and SKILL.md; 409 skill_name_taken if the name is used. */
async function insertSkill(trx: Transaction<RegistryDatabase>, sellerId: string, skill: NewSkill, now: Date) {
  const { body, typeFields } = skill;
  const skillId = newId('skl');
  const inserted = await trx
    .insertInto('skills')
    .values({
      id: skillId,
      seller_id: sellerId,
      name: body.name,
      display_name: body.displayName,
      description: body.description,
      api_base_url: skill.apiBaseUrl,
      mode: body.mode ?? 'PROXY',
      type: typeFields.type,
      categories: skill.categories,
      duration_days: typeFields.durationDays,
      requires_shipping: typeFields.requiresShipping,
      hold_period_hours: typeFields.holdPeriodHours,
      status: 'PENDING_VALIDATION',
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.column('name').doNothing())
    .returning('id')
    .executeTakeFirst();
  if (!inserted) {
    const message = `a skill named ${body.name} already exists`;
    throw refusal(409, RegistryReason.SkillNameTaken, message, 'must be unique', 'name');
  }
  for (const e of skill.endpoints) await insertEndpoint(trx, skillId, e, now);
  return skillId;
}

/** The type fields after a PATCH: a field the new type does not use is dropped unless the request sets it. */
function patchedTypeFields(skill: SkillRow, body: Static<typeof SkillPatch>): TypeFields {
  const type = body.type ?? skill.type;
  const typeChanged = type !== skill.type;
  const field = <T>(value: T | null | undefined, usedBy: SkillType[], current: T | null) =>
    value !== undefined ? value : typeChanged && !usedBy.includes(type) ? null : current;
  const keepHoldDefault = typeChanged && skill.hold_period_hours === defaultHoldHours(skill.type);
  return checkTypeFields({
    type,
    durationDays: field(body.durationDays, ['SaaS', 'Subscription'], skill.duration_days),
    requiresShipping: field(body.requiresShipping, ['Product'], skill.requires_shipping),
    holdPeriodHours:
      body.holdPeriodHours ?? (keepHoldDefault ? defaultHoldHours(type) : skill.hold_period_hours),
  });
}

/** The checked parts of a new skill: its URL, type fields, categories and endpoints (routes unique, unambiguous). */
async function checkNewSkill(rc: SkillRouteKit['rc'], body: Static<typeof SkillCreate>) {
  const apiBaseUrl = await checkSellerUrl(rc, 'apiBaseUrl', body.apiBaseUrl);
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
  return { body, apiBaseUrl, typeFields, categories, endpoints };
}

/** Applies a PATCH (its URL and categories already checked) to the seller's skill named in the path. */
async function patchSkill(
  kit: SkillRouteKit,
  trx: Transaction<RegistryDatabase>,
  req: Request,
  body: Omit<Static<typeof SkillPatch>, 'apiBaseUrl' | 'categories'> & {
    apiBaseUrl?: string;
    categories?: string[];
  },
  now: Date,
) {
  const { apiBaseUrl, categories } = body;
  const { skill } = await kit.ownedSkill(trx, req);
  const baseUrlChanged = apiBaseUrl !== undefined && apiBaseUrl !== skill.api_base_url;
  const transition = skillTransition(skill.status, baseUrlChanged ? 'base_url_changed' : 'edited');
  const typeFields = patchedTypeFields(skill, body);
  await trx
    .updateTable('skills')
    // Kysely leaves out the columns set to undefined: fields the PATCH does not name stay.
    .set({
      display_name: body.displayName,
      description: body.description,
      api_base_url: apiBaseUrl,
      mode: body.mode,
      categories,
      type: typeFields.type,
      duration_days: typeFields.durationDays,
      requires_shipping: typeFields.requiresShipping,
      hold_period_hours: typeFields.holdPeriodHours,
    })
    .where('id', '=', skill.id)
    .execute();
  await applySkillTransition(trx, skill.id, transition);
  if (skill.skill_md_source === 'generated') await regenerateSkillMd(trx, skill.id, kit.base);
  return commitSkillChange(trx, skill.id, now);
}

/** The seller's SKILL.md by hand (checked like a generated one); the skill's status must allow an edit. */
async function replaceSkillMd(
  kit: SkillRouteKit,
  trx: Transaction<RegistryDatabase>,
  req: Request,
  content: string,
) {
  const current = await kit.ownedSkill(trx, req);
  skillTransition(current.skill.status, 'edited');
  const version = current.skill.skill_md_version + 1;
  const accepted = acceptManualSkillMd(content, current.skill.name, skillMdVersion(version));
  if ('rule' in accepted) throw badRequest(accepted.field, accepted.rule);
  await trx
    .updateTable('skills')
    .set({ skill_md: accepted.content, skill_md_version: version, skill_md_source: 'manual' })
    .where('id', '=', current.skill.id)
    .execute();
  return loadSkill(trx, { id: current.skill.id });
}

/** The seller's own skills: create, with its endpoints and generated SKILL.md, validated in the background. */
export function createSkillRoute(kit: SkillRouteKit): AnyRoute {
  const { rc } = kit;
  return defineRoute({
    method: 'post',
    path: '/api/v1/manage/skills',
    summary: 'Create a skill (PENDING_VALIDATION, validated in the background)',
    auth: kit.auth,
    body: SkillCreate,
    headers: [idempotencyKey],
    responses: { '201': Skill },
    errors: { '409': 'skill_name_taken, skill_limit_reached or idempotency_key_reused' },
    handler: async (req, res) => {
      const skill = await checkNewSkill(rc, req.body);
      const seller = currentSeller(req);
      await idempotent(rc.ctx.db, req, res, seller.id, async () => {
        const created = await kit.change(async (trx, now) => {
          await refuseSkillOverLimit(trx, seller.id, rc.config.maxSkillsPerSeller);
          const skillId = await insertSkill(trx, seller.id, skill, now);
          await regenerateSkillMd(trx, skillId, kit.base);
          return commitSkillChange(trx, skillId, now);
        });
        return { status: 201, body: created };
      });
    },
  });
}

export function listSkillsRoute({ rc, auth, render }: SkillRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/manage/skills',
    summary: "List the seller's skills (every status)",
    auth,
    query: ListQuery,
    responses: { '200': SkillList },
    handler: async (req, res) => {
      const { db } = rc.ctx;
      const select = db.selectFrom('skills').selectAll().where('seller_id', '=', currentSeller(req).id);
      res.json(await skillPage(db, select, req.query, render));
    },
  });
}

export function getSkillRoute({ auth, render, readOwnedSkill }: SkillRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/manage/skills/:name',
    summary: 'One skill with its endpoints',
    auth,
    params: NameParams,
    responses: { '200': Skill },
    errors: { '404': 'no such skill of this seller' },
    handler: async (req, res) => {
      res.json(render(await readOwnedSkill(req)));
    },
  });
}

export function getSkillMdRoute({ auth, readOwnedSkill }: SkillRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/manage/skills/:name/skill-md',
    summary: 'The current SKILL.md of the skill, whatever its status',
    auth,
    params: NameParams,
    responses: { '200': skillMdResponse },
    errors: { '404': 'no such skill of this seller' },
    handler: async (req, res) => {
      const state = await readOwnedSkill(req);
      res.type('text/markdown; charset=utf-8').send(state.skill.skill_md);
    },
  });
}

export function patchSkillRoute(kit: SkillRouteKit): AnyRoute {
  const { rc } = kit;
  return defineRoute({
    method: 'patch',
    path: '/api/v1/manage/skills/:name',
    summary: 'Change a skill (name is immutable); a new apiBaseUrl is validated again',
    auth: kit.auth,
    params: NameParams,
    body: SkillPatch,
    responses: { '200': Skill },
    errors: { '404': 'no such skill of this seller', '409': 'skill_archived' },
    handler: async (req, res) => {
      const body = req.body;
      const apiBaseUrl =
        body.apiBaseUrl === undefined ? undefined : await checkSellerUrl(rc, 'apiBaseUrl', body.apiBaseUrl);
      const categories = body.categories === undefined ? undefined : normalizeCategories(body.categories);
      const patch = { ...body, apiBaseUrl, categories };
      res.json(await kit.change((trx, now) => patchSkill(kit, trx, req, patch, now)));
    },
  });
}

export function replaceSkillMdRoute(kit: SkillRouteKit): AnyRoute {
  return defineRoute({
    method: 'put',
    path: '/api/v1/manage/skills/:name/skill-md',
    summary: 'Replace SKILL.md by hand. A later endpoint change regenerates it and replaces the hand edit.',
    auth: kit.auth,
    params: NameParams,
    body: SkillMdReplace,
    responses: { '200': Skill },
    errors: { '404': 'no such skill of this seller', '409': 'skill_archived' },
    handler: async (req, res) => {
      const state = await kit.rc.ctx.inTransaction((trx) => replaceSkillMd(kit, trx, req, req.body.content));
      res.json(kit.render(state!));
    },
  });
}
