import { badRequest, idempotencyKeyParameter, notFound } from '@paygate/http';
import { Type } from '@sinclair/typebox';
import type { Request } from 'express';
import type { Kysely, SelectQueryBuilder, Transaction } from 'kysely';
import { currentSeller, operatorRouteAuth, sellerRouteAuth } from '../../auth/authenticate';
import type { RegistryContext } from '../../context';
import type { RegistryDatabase } from '../../db';
import { textResponse } from '../../shared/schema';
import { loadEndpoints, loadSkill, type SkillRow, type SkillWithEndpoints, toSkill } from '../repository';

export interface ValidationKicker {
  kick(): void;
}

const NAME_PARAM = /^[a-z0-9]+(-[a-z0-9]+)*$/;

// Path values are checked by the handlers (nameParam, endpointIdParam): one that names nothing is 404.
const SkillNameParam = Type.String({ description: 'the skill name (kebab-case); any other value is 404' });
export const NameParams = Type.Object({ name: SkillNameParam });
export const EndpointParams = Type.Object({ name: SkillNameParam, endpointId: Type.String() });
export const idempotencyKey = idempotencyKeyParameter(
  'the same key with the same request replays the stored response',
);
export const skillMdResponse = textResponse('SKILL.md', 'text/markdown');

export function nameParam(req: Request): string {
  const name = String(req.params.name ?? '');
  if (name.length > 64 || !NAME_PARAM.test(name)) throw notFound('skill');
  return name;
}

export function endpointIdParam(req: Request): string {
  const id = String(req.params.endpointId ?? '');
  if (id.length > 64) throw notFound('endpoint');
  return id;
}

function decodeCursor(cursor: string | undefined): string | undefined {
  if (!cursor) return undefined;
  const name = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!NAME_PARAM.test(name))
    throw badRequest('cursor', 'must be a nextCursor from a previous page', 'cursor is invalid');
  return name;
}

/** One page of skills by name after the cursor, with their endpoints, as `view` shows them. */
export async function skillPage<T>(
  db: Kysely<RegistryDatabase>,
  select: SelectQueryBuilder<RegistryDatabase, 'skills', SkillRow>,
  query: { limit?: number | string; cursor?: string },
  view: (state: SkillWithEndpoints) => T,
): Promise<{ data: T[]; nextCursor: string | null }> {
  const limit = Number(query.limit ?? 20);
  const after = decodeCursor(query.cursor);
  const rows = await (after ? select.where('name', '>', after) : select)
    .orderBy('name')
    .limit(limit + 1)
    .execute();
  const page = rows.slice(0, limit);
  const ids = page.map((r) => r.id);
  const endpoints = await loadEndpoints(db, ids);
  return {
    data: page.map((skill) => view({ skill, endpoints: endpoints.get(skill.id) ?? [] })),
    nextCursor: rows.length > limit ? Buffer.from(page[page.length - 1]!.name).toString('base64url') : null,
  };
}

async function found(lookup: Promise<SkillWithEndpoints | undefined>): Promise<SkillWithEndpoints> {
  const state = await lookup;
  if (!state) throw notFound('skill');
  return state;
}

/** What every skill route group shares: the context, the auth guards, the renderer and the skill lookups. */
export type SkillRouteKit = ReturnType<typeof skillRouteKit>;

export function skillRouteKit(rc: RegistryContext, validation: ValidationKicker) {
  /** PUBLIC_BASE_URL: the links in SKILL.md and the views. */
  const base = rc.config.publicBaseUrl;
  return {
    rc,
    validation,
    auth: sellerRouteAuth(rc),
    operator: operatorRouteAuth(rc),
    base,
    render: (state: SkillWithEndpoints) => toSkill(base, state),
    /** A change of what the checker looks at, in one transaction at one `now`; then the checker is woken. */
    change: async (work: (trx: Transaction<RegistryDatabase>, now: Date) => Promise<SkillWithEndpoints>) => {
      const now = rc.config.now();
      const state = await rc.ctx.inTransaction((trx) => work(trx, now));
      validation.kick();
      return toSkill(base, state);
    },
    // The seller's skill named in the path (404 when it has none of this name), locked or not; or any seller's.
    ownedSkill: (trx: Transaction<RegistryDatabase>, req: Request) =>
      found(loadSkill(trx, { name: nameParam(req), sellerId: currentSeller(req).id }, { forUpdate: true })),
    readOwnedSkill: (req: Request) =>
      found(loadSkill(rc.ctx.db, { name: nameParam(req), sellerId: currentSeller(req).id })),
    anySkill: (trx: Transaction<RegistryDatabase>, req: Request) =>
      found(loadSkill(trx, { name: nameParam(req) }, { forUpdate: true })),
  };
}
