import { productionUrlProblem, type SellerFetch, sellerFetch } from '@paygate/net';
import { type BackgroundTask, backoffDelayMs, PolledTask, PollingLoop } from '@paygate/runtime';
import { sql } from 'kysely';
import type { RegistryContext } from '../context';
import {
  commitSkillChange,
  type EndpointRow,
  loadSkill,
  type SkillWithEndpoints,
} from '../skills/repository';
import { applySkillTransition, findSkillTransition } from '../skills/status';
import { probeEndpoint } from './probe';

const LEASE_MS = 60_000;
/** After a failed pass: up to 1 s, doubling, at most a lease (no bound on attempts: the loop runs for good). */
const PASS_BACKOFF = { baseMs: 1000, maxMs: LEASE_MS };

async function mapBounded<T, R>(items: T[], concurrency: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await fn(items[index]!);
    }
  });
  await Promise.all(workers);
  return results;
}

/** Validation of pending skills and health pings of active ones; rows claimed with SKIP LOCKED and a lease. */
export class SkillChecker extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;
  /** Every HEAD goes through it: in production a host resolving to a non-public address is refused at connect. */
  private readonly sellers: SellerFetch;
  /** Consecutive passes that failed (the backoff's attempt number). */
  private failedPasses = 0;

  constructor(private readonly rc: RegistryContext) {
    super();
    this.sellers = sellerFetch({ publicOnly: rc.config.production, resolve: rc.resolveHost });
    this.loop = new PollingLoop(
      async () => {
        try {
          await this.validatePending();
          await this.pingHealth();
          this.failedPasses = 0;
        } catch (error) {
          // A broken dependency (Postgres away) is not hammered: the next pass waits the shared backoff.
          this.failedPasses++;
          rc.ctx.logger.warn(
            { err: error, failedPasses: this.failedPasses },
            'skill checks failed; will retry',
          );
          return { delayMs: backoffDelayMs(this.failedPasses, PASS_BACKOFF)! };
        }
      },
      {
        what: 'skill checks',
        logger: rc.ctx.logger,
        intervalMs: rc.config.validationIntervalMs,
        stopWaitMs: 6000,
      },
    );
  }

  /** Once no pass runs: the connections to sellers' APIs. (kick(): a skill was created or sent back to validation.) */
  protected override async afterStop(): Promise<void> {
    await this.sellers.close();
  }

  /** One bounded pass: claim up to `validationConcurrency` pending skills and validate them. */
  async validatePending(): Promise<number> {
    const { ctx, config } = this.rc;
    const now = new Date();
    const claimed = await sql<{ id: string; validation_seq: number }>`
      update skills set validation_lease_until = ${new Date(now.getTime() + LEASE_MS)}
      where id in (
        select id from skills
        where status = 'PENDING_VALIDATION' and (validation_lease_until is null or validation_lease_until < ${now})
        order by updated_at limit ${config.validationConcurrency}
        for update skip locked)
      returning id, validation_seq`.execute(ctx.db);
    await Promise.all(
      claimed.rows.map(async ({ id, validation_seq }) => {
        const state = await loadSkill(ctx.db, { id });
        if (!state) return;
        const { failure, health } = await this.probeSkill(state);
        await this.recordValidation(id, validation_seq, failure, health);
      }),
    );
    return claimed.rows.length;
  }

  private probe(state: SkillWithEndpoints, e: EndpointRow) {
    const options = { method: e.method, pathHasParameters: e.path.includes('/:') };
    const url = `${state.skill.api_base_url}${e.path}`;
    return probeEndpoint(this.sellers, url, this.rc.config.validationTimeoutMs, options);
  }

  /** The first failure (undefined: passed) and each probed endpoint's health; probing stops at the first failure. */
  private async probeSkill(
    state: SkillWithEndpoints,
  ): Promise<{ failure?: string; health: Map<string, boolean> }> {
    const { config } = this.rc;
    const health = new Map<string, boolean>();
    if (config.production) {
      // Addresses are checked when each HEAD connects (DNS may have changed since registration).
      const problem = productionUrlProblem(new URL(state.skill.api_base_url));
      if (problem) return { failure: `apiBaseUrl ${problem}`, health };
    }
    const active = state.endpoints.filter((e) => e.active);
    if (active.length === 0)
      return { failure: 'the skill has no endpoints: add at least one endpoint', health };
    let failed = false;
    const results = await mapBounded(active, 4, async (e) => {
      if (failed) return undefined;
      const result = await this.probe(state, e);
      health.set(e.id, result.ok);
      if (!result.ok) failed = true;
      return result;
    });
    const firstBad = active.findIndex((_, i) => results[i]?.ok === false);
    if (firstBad < 0) return { health };
    const e = active[firstBad]!;
    return {
      failure: `endpoint ${e.method} ${e.path}: HEAD ${state.skill.api_base_url}${e.path} ${results[firstBad]!.cause}`,
      health,
    };
  }

  /** Applies the outcome, unless the skill changed while it was checked (then the next pass checks it again). */
  private async recordValidation(
    skillId: string,
    seq: number,
    failure: string | undefined,
    health: Map<string, boolean>,
  ): Promise<void> {
    const { ctx, config } = this.rc;
    await ctx.inTransaction(async (trx) => {
      const current = await trx
        .selectFrom('skills')
        .select(['status', 'validation_seq'])
        .where('id', '=', skillId)
        .forUpdate()
        .executeTakeFirst();
      if (!current) return;
      const transition =
        current.validation_seq === seq
          ? findSkillTransition(current.status, failure ? 'validation_failed' : 'validation_passed')
          : undefined;
      if (!transition) {
        // The skill changed while it was being checked: this result is stale.
        await trx
          .updateTable('skills')
          .set({ validation_lease_until: null })
          .where('id', '=', skillId)
          .execute();
        return;
      }
      for (const [endpointId, healthy] of health) {
        await trx
          .updateTable('endpoints')
          .set({ is_healthy: healthy })
          .where('id', '=', endpointId)
          .execute();
      }
      await applySkillTransition(trx, skillId, transition, {
        reason: failure ?? null,
        also: { health_checked_at: new Date() },
      });
      await commitSkillChange(trx, skillId, config.now());
    });
    ctx.logger.info(
      { skillId, outcome: failure ? 'VALIDATION_FAILED' : 'ACTIVE', reason: failure },
      'skill validated',
    );
  }

  /** One bounded pass of health pings over ACTIVE skills whose last ping is older than the interval. */
  async pingHealth(): Promise<number> {
    const { ctx, config } = this.rc;
    const now = new Date();
    const claimed = await sql<{ id: string }>`
      update skills set health_checked_at = ${now}
      where id in (
        select id from skills
        where status = 'ACTIVE' and (health_checked_at is null or health_checked_at < ${new Date(now.getTime() - config.healthIntervalMs)})
        order by health_checked_at nulls first limit ${config.healthBatchSize}
        for update skip locked)
      returning id`.execute(ctx.db);
    await mapBounded(claimed.rows, config.healthConcurrency, (row) => this.pingOne(row.id));
    return claimed.rows.length;
  }

  private async pingOne(skillId: string): Promise<void> {
    const { ctx, config } = this.rc;
    const state = await loadSkill(ctx.db, { id: skillId });
    if (!state) return;
    const active = state.endpoints.filter((e) => e.active);
    const blocked = config.production ? productionUrlProblem(new URL(state.skill.api_base_url)) : undefined;
    const results = blocked
      ? active.map(() => ({ ok: false }))
      : await mapBounded(active, 4, (e) => this.probe(state, e));
    const changed = active.filter((e, i) => e.is_healthy !== results[i]!.ok);
    if (changed.length === 0) return;
    await ctx.inTransaction(async (trx) => {
      for (const e of changed) {
        await trx
          .updateTable('endpoints')
          .set({ is_healthy: !e.is_healthy })
          .where('id', '=', e.id)
          .where('is_healthy', '=', e.is_healthy)
          .execute();
      }
      await commitSkillChange(trx, skillId, config.now());
    });
    ctx.logger.info(
      { skillId, changed: changed.map((e) => ({ endpointId: e.id, isHealthy: !e.is_healthy })) },
      'endpoint health changed',
    );
  }
}
