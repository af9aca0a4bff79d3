import { type AnyRoute, defineRoute } from '@paygate/http';
import { NoBody } from '../../shared/schema';
import { commitSkillChange } from '../repository';
import { Skill, SuspendBody } from '../schemas';
import { applySkillTransition, type SkillEvent, skillTransition } from '../status';
import { NameParams, type SkillRouteKit } from './kit';

interface StatusMove {
  event: SkillEvent;
  path: string;
  summary: string;
  errors: Record<string, string>;
  /** An operator's move, on any seller's skill; else the seller's own. */
  operator?: boolean;
  /** The move sends the skill to validation: the checker is woken. */
  kick?: boolean;
  status?: '202';
}

/**
 * The route of the status move `event` (its rules: ../status.ts) of the skill named in the path. A move that writes
 * nothing (the action was already done) answers the skill as it is.
 */
const statusRoute =
  (move: StatusMove) =>
  (kit: SkillRouteKit): AnyRoute =>
    defineRoute({
      method: 'post',
      path: move.path,
      summary: move.summary,
      auth: move.operator ? kit.operator : kit.auth,
      params: NameParams,
      ...(move.event === 'suspend' ? { body: SuspendBody, bodyOptional: true } : NoBody),
      responses: { [move.status ?? '200']: Skill },
      errors: move.errors,
      handler: async (req, res) => {
        const reason =
          move.event === 'suspend'
            ? ((req.body as { reason?: string }).reason ?? 'suspended by an operator')
            : undefined;
        const state = await kit.rc.ctx.inTransaction(async (trx) => {
          const current = move.operator ? await kit.anySkill(trx, req) : await kit.ownedSkill(trx, req);
          const transition = skillTransition(current.skill.status, move.event);
          if (!(await applySkillTransition(trx, current.skill.id, transition, { reason }))) return current;
          return commitSkillChange(trx, current.skill.id, kit.rc.config.now());
        });
        if (move.kick) kit.validation.kick();
        res.status(Number(move.status ?? 200)).json(kit.render(state));
      },
    });

export const archiveSkillRoute = statusRoute({
  event: 'archive',
  path: '/api/v1/manage/skills/:name/archive',
  summary: 'Archive the skill (final)',
  errors: { '404': 'no such skill of this seller', '409': 'skill_suspended' },
});

export const retryValidationRoute = statusRoute({
  event: 'retry_validation',
  path: '/api/v1/manage/skills/:name/validate',
  summary: 'Retry validation of a VALIDATION_FAILED skill',
  errors: {
    '404': 'no such skill of this seller',
    '409': 'invalid_state: the skill is not VALIDATION_FAILED',
  },
  kick: true,
  status: '202',
});

export const suspendSkillRoute = statusRoute({
  event: 'suspend',
  path: '/api/v1/operator/skills/:name/suspend',
  summary: 'Operator: suspend a skill',
  errors: { '404': 'no such skill', '409': 'skill_archived' },
  operator: true,
});

export const unsuspendSkillRoute = statusRoute({
  event: 'unsuspend',
  path: '/api/v1/operator/skills/:name/unsuspend',
  summary: 'Operator: lift a suspension (the skill is validated again)',
  errors: { '404': 'no such skill', '409': 'invalid_state: the skill is not SUSPENDED' },
  operator: true,
  kick: true,
});
