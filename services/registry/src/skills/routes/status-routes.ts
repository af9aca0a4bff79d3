import { type AnyRoute, defineRoute } from '@paygate/http';
import type { Request } from 'express';
import { NoBody } from '../../shared/schema';
import { commitSkillChange } from '../repository';
import { Skill, SuspendBody } from '../schemas';
import { applySkillTransition, type SkillEvent, skillTransition } from '../status';
import { NameParams, type SkillRouteKit } from './kit';

/**
 * The status move `event` (its rules: ../status.ts) of the skill named in the path, the seller's own or any for an
 * operator. A move that writes nothing (the action was already done) answers the skill as it is.
 */
async function moveSkill(
  kit: SkillRouteKit,
  req: Request,
  event: SkillEvent,
  lookup: 'owned' | 'any',
  reason?: string,
) {
  const { ctx, config } = kit.rc;
  return ctx.inTransaction(async (trx) => {
    const current = lookup === 'owned' ? await kit.ownedSkill(trx, req) : await kit.anySkill(trx, req);
    const transition = skillTransition(current.skill.status, event);
    if (!(await applySkillTransition(trx, current.skill.id, transition, { reason }))) return current;
    return commitSkillChange(trx, current.skill.id, config.now());
  });
}

export function archiveSkillRoute(kit: SkillRouteKit): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/manage/skills/:name/archive',
    summary: 'Archive the skill (final)',
    auth: kit.auth,
    params: NameParams,
    ...NoBody,
    responses: { '200': Skill },
    errors: { '404': 'no such skill of this seller', '409': 'skill_suspended' },
    handler: async (req, res) => {
      res.json(kit.render(await moveSkill(kit, req, 'archive', 'owned')));
    },
  });
}

export function retryValidationRoute(kit: SkillRouteKit): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/manage/skills/:name/validate',
    summary: 'Retry validation of a VALIDATION_FAILED skill',
    auth: kit.auth,
    params: NameParams,
    ...NoBody,
    responses: { '202': Skill },
    errors: {
      '404': 'no such skill of this seller',
      '409': 'invalid_state: the skill is not VALIDATION_FAILED',
    },
    handler: async (req, res) => {
      const state = await moveSkill(kit, req, 'retry_validation', 'owned');
      kit.validation.kick();
      res.status(202).json(kit.render(state));
    },
  });
}

export function suspendSkillRoute(kit: SkillRouteKit): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/operator/skills/:name/suspend',
    summary: 'Operator: suspend a skill',
    auth: kit.operator,
    params: NameParams,
    body: SuspendBody,
    bodyOptional: true,
    responses: { '200': Skill },
    errors: { '404': 'no such skill', '409': 'skill_archived' },
    handler: async (req, res) => {
      const reason = req.body.reason ?? 'suspended by an operator';
      res.json(kit.render(await moveSkill(kit, req, 'suspend', 'any', reason)));
    },
  });
}

export function unsuspendSkillRoute(kit: SkillRouteKit): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/operator/skills/:name/unsuspend',
    summary: 'Operator: lift a suspension (the skill is validated again)',
    auth: kit.operator,
    params: NameParams,
    ...NoBody,
    responses: { '200': Skill },
    errors: { '404': 'no such skill', '409': 'invalid_state: the skill is not SUSPENDED' },
    handler: async (req, res) => {
      const state = await moveSkill(kit, req, 'unsuspend', 'any');
      kit.validation.kick();
      res.json(kit.render(state));
    },
  });
}
