import { EventTooLargeError, enqueueEvent, MAX_EVENT_BYTES } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { formatDollars, formatUsdc } from '@paygate/money';
import { currentTraceCarrier } from '@paygate/telemetry';
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { EndpointsTable, HttpMethod, RegistryDatabase, SkillsTable } from '../db';
import { refusal, SkillVanishedError } from '../errors';
import { RegistryReason } from '../reasons';
import { newId } from '../shared/secrets';
import { generateSkillMd, skillMdVersion } from './skill-md';

export type SkillRow = Selectable<SkillsTable>;
export type EndpointRow = Selectable<EndpointsTable>;
export interface SkillWithEndpoints {
  skill: SkillRow;
  endpoints: EndpointRow[];
}

const skillBaseUrl = (publicBaseUrl: string, name: string) => `${publicBaseUrl}/api/v1/skills/${name}`;

/** What the catalog shows of a skill. */
const publicFields = (skill: SkillRow) => ({
  name: skill.name,
  displayName: skill.display_name,
  description: skill.description,
  type: skill.type,
  mode: skill.mode,
  categories: skill.categories,
  durationDays: skill.duration_days,
  requiresShipping: skill.requires_shipping,
});

/** What its seller and the serving snapshot (skill.updated) show besides. */
const servingFields = (skill: SkillRow) => ({
  skillId: skill.id,
  sellerId: skill.seller_id,
  revision: skill.revision,
  ...publicFields(skill),
  status: skill.status,
  apiBaseUrl: skill.api_base_url,
  holdPeriodHours: skill.hold_period_hours,
});

export function toSkill(publicBaseUrl: string, { skill, endpoints }: SkillWithEndpoints) {
  const baseUrl = skillBaseUrl(publicBaseUrl, skill.name);
  return {
    ...servingFields(skill),
    statusReason: skill.status_reason,
    baseUrl,
    skillMdUrl: `${baseUrl}/SKILL.md`,
    skillMdVersion: skillMdVersion(skill.skill_md_version),
    skillMdSource: skill.skill_md_source,
    endpoints: endpoints.map((e) => ({
      endpointId: e.id,
      path: e.path,
      method: e.method,
      description: e.description,
      priceUsdc: formatUsdc(e.price_micro),
      isHealthy: e.is_healthy,
      active: e.active,
      url: `${baseUrl}${e.path}`,
    })),
    createdAt: skill.created_at.toISOString(),
    updatedAt: skill.updated_at.toISOString(),
  };
}

export function toCatalogSkill(publicBaseUrl: string, { skill, endpoints }: SkillWithEndpoints) {
  const baseUrl = skillBaseUrl(publicBaseUrl, skill.name);
  return {
    ...publicFields(skill),
    baseUrl,
    skillMdUrl: `${baseUrl}/SKILL.md`,
    // In PROXY mode the seller's own URL stays private: calling it directly would bypass payment.
    ...(skill.mode === 'TICKET' ? { apiBaseUrl: skill.api_base_url } : {}),
    endpoints: endpoints
      .filter((e) => e.active)
      .map((e) => ({
        path: e.path,
        method: e.method,
        description: e.description,
        priceUsdc: formatUsdc(e.price_micro),
        price: formatDollars(e.price_micro),
        isHealthy: e.is_healthy,
        url: `${baseUrl}${e.path}`,
      })),
  };
}

export async function insertEndpoint(
  trx: Transaction<RegistryDatabase>,
  skillId: string,
  e: { path: string; method: HttpMethod; description: string; priceMicro: bigint },
  now: Date,
): Promise<void> {
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

export async function loadEndpoints(
  db: Kysely<RegistryDatabase>,
  skillIds: string[],
): Promise<Map<string, EndpointRow[]>> {
  const byId = new Map<string, EndpointRow[]>(skillIds.map((id) => [id, []]));
  if (skillIds.length === 0) return byId;
  const rows = await db
    .selectFrom('endpoints')
    .selectAll()
    .where('skill_id', 'in', skillIds)
    .orderBy('position')
    .execute();
  for (const row of rows) byId.get(row.skill_id)?.push(row);
  return byId;
}

export async function loadSkill(
  db: Kysely<RegistryDatabase>,
  where: { id?: string; name?: string; sellerId?: string },
  options: { forUpdate?: boolean } = {},
): Promise<SkillWithEndpoints | undefined> {
  let query = db.selectFrom('skills').selectAll();
  if (where.id !== undefined) query = query.where('id', '=', where.id);
  if (where.name !== undefined) query = query.where('name', '=', where.name);
  if (where.sellerId !== undefined) query = query.where('seller_id', '=', where.sellerId);
  if (options.forUpdate) query = query.forUpdate();
  const skill = await query.executeTakeFirst();
  if (!skill) return undefined;
  const endpoints = (await loadEndpoints(db, [skill.id])).get(skill.id) ?? [];
  return { skill, endpoints };
}

/** Regenerates SKILL.md from the skill and its active endpoints, with the next version. */
export async function regenerateSkillMd(
  trx: Transaction<RegistryDatabase>,
  skillId: string,
  publicBaseUrl: string,
) {
  const current = await loadSkill(trx, { id: skillId });
  if (!current) return;
  const nextVersion = current.skill.skill_md_version + 1;
  const baseUrl = skillBaseUrl(publicBaseUrl, current.skill.name);
  const content = generateSkillMd(current, baseUrl, skillMdVersion(nextVersion));
  await trx
    .updateTable('skills')
    .set({ skill_md: content, skill_md_version: nextVersion, skill_md_source: 'generated' })
    .where('id', '=', skillId)
    .execute();
}

/**
 * Bumps the skill's revision and publishes its full serving snapshot (skill.updated) through the outbox, in
 * the caller's transaction. Returns the fresh state.
 */
export async function commitSkillChange(
  trx: Transaction<RegistryDatabase>,
  skillId: string,
  now: Date,
): Promise<SkillWithEndpoints> {
  await trx
    .updateTable('skills')
    .set((eb) => ({ revision: eb('revision', '+', 1), updated_at: now }))
    .where('id', '=', skillId)
    .execute();
  const state = await loadSkill(trx, { id: skillId });
  if (!state) throw new SkillVanishedError(skillId);
  await publishSkillUpdated(trx, state, now);
  return state;
}

async function publishSkillUpdated(
  trx: Transaction<RegistryDatabase>,
  { skill, endpoints }: SkillWithEndpoints,
  now: Date,
) {
  try {
    await enqueueEvent(
      trx,
      createEvent(
        'skill.updated',
        'registry',
        {
          ...servingFields(skill),
          endpoints: endpoints.map((e) => ({
            endpointId: e.id,
            path: e.path,
            method: e.method,
            description: e.description,
            price: formatUsdc(e.price_micro),
            isHealthy: e.is_healthy,
            active: e.active,
          })),
          updatedAt: skill.updated_at.toISOString(),
        },
        { occurredAt: now, trace: currentTraceCarrier() },
      ),
    );
  } catch (error) {
    if (!(error instanceof EventTooLargeError)) throw error;
    // Nothing is stored: the request's transaction rolls back.
    const message = `with this change the skill would be ${error.bytes} bytes as an event, over the ${MAX_EVENT_BYTES} bytes one may carry: shorten descriptions or remove endpoints`;
    const rule = `the skill as JSON at most ${MAX_EVENT_BYTES} bytes`;
    throw refusal(413, RegistryReason.SkillTooLarge, message, rule, 'endpoints');
  }
}
