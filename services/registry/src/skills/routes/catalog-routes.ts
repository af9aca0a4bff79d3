import { type AnyRoute, defineRoute, notFound } from '@paygate/http';
import { sql } from 'kysely';
import { loadSkill, toCatalogSkill } from '../repository';
import { Catalog, ListQuery } from '../schemas';
import { NameParams, nameParam, type SkillRouteKit, skillMdResponse, skillPage } from './kit';

// Public discovery: the catalog of ACTIVE skills and their SKILL.md (no authentication).

export function catalogRoute({ rc, base }: SkillRouteKit): AnyRoute {
  const { db } = rc.ctx;
  return defineRoute({
    method: 'get',
    path: '/api/v1/skills',
    summary: 'Public catalog of ACTIVE skills, filterable by category and text, paginated',
    query: ListQuery,
    responses: { '200': Catalog },
    handler: async (req, res) => {
      const query = req.query;
      let select = db.selectFrom('skills').selectAll().where('status', '=', 'ACTIVE');
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
      res.json(await skillPage(db, select, query, (state) => toCatalogSkill(base, state)));
    },
  });
}

export function catalogSkillMdRoute({ rc }: SkillRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/skills/:name/SKILL.md',
    summary: 'Public SKILL.md of an ACTIVE skill',
    params: NameParams,
    responses: { '200': skillMdResponse },
    errors: { '404': 'no ACTIVE skill of this name' },
    handler: async (req, res) => {
      const state = await loadSkill(rc.ctx.db, { name: nameParam(req) });
      if (state?.skill.status !== 'ACTIVE') throw notFound('skill');
      res.setHeader('cache-control', 'public, max-age=60');
      res.type('text/markdown; charset=utf-8').send(state.skill.skill_md);
    },
  });
}
