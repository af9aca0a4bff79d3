import { type AnyRoute, defineRoute } from '@paygate/http';
import { Type } from '@sinclair/typebox';
import { SkillName } from '../schemas';
import type { SkillRouteKit } from './kit';

const NameAvailability = Type.Object({
  name: Type.String(),
  available: Type.Boolean({ description: 'no skill of any seller (archived ones included) has this name' }),
  reason: Type.Optional(Type.Literal('taken', { description: 'present when not available' })),
});

/**
 * Whether a skill name is free, for a form that checks it as it is typed. Creating the skill still decides
 * (409 skill_name_taken); a seller learns nothing here that the create call would not tell.
 */
export function skillNameRoute({ rc, auth }: SkillRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/manage/skill-names/:name',
    summary: 'Whether a skill name is still free (names are unique across Paygate)',
    auth,
    params: Type.Object({ name: SkillName }),
    responses: { '200': NameAvailability },
    handler: async (req, res) => {
      const name = String((req.params as { name: string }).name);
      const existing = await rc.ctx.db
        .selectFrom('skills')
        .select('id')
        .where('name', '=', name)
        .executeTakeFirst();
      res.json(existing ? { name, available: false, reason: 'taken' } : { name, available: true });
    },
  });
}
