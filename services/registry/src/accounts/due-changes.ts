import { type BackgroundTask, PolledTask, PollingLoop } from '@paygate/runtime';
import { sql } from 'kysely';
import type { RegistryContext } from '../context';
import { publishSellerUpdated, type SellerRow } from './repository';

const BATCH = 100;

/** Delayed payout addresses and ended key overlaps, applied when due (SKIP LOCKED batches), each with seller.updated. */
export class DueAccountChanges extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(private readonly rc: RegistryContext) {
    super();
    this.loop = new PollingLoop(() => this.applyDue(), {
      what: 'due account changes',
      logger: rc.ctx.logger,
      intervalMs: rc.config.accountChangesIntervalMs,
      stopWaitMs: 5000,
    });
  }

  /** One pass: every due payout change and ended overlap, up to BATCH of each. */
  async applyDue(): Promise<void> {
    const now = this.rc.config.now();
    await this.rc.ctx.inTransaction(async (trx) => {
      const payouts = await sql<SellerRow>`
        update sellers set payout_address = pending_payout_address, pending_payout_address = null,
          pending_payout_effective_at = null, revision = revision + 1, updated_at = ${now}
        where id in (select id from sellers where pending_payout_address is not null
                     and pending_payout_effective_at <= ${now} order by pending_payout_effective_at
                     limit ${BATCH} for update skip locked)
        returning *`.execute(trx);
      const overlaps = await sql<SellerRow>`
        update sellers set previous_api_key_hash = null, previous_api_key_expires_at = null,
          previous_forwarding_key_encrypted = null, previous_api_key_name = null, previous_api_key_hint = null,
          previous_api_key_created_at = null, previous_api_key_last_used_at = null,
          revision = revision + 1, updated_at = ${now}
        where id in (select id from sellers where previous_api_key_hash is not null
                     and previous_api_key_expires_at <= ${now} order by previous_api_key_expires_at
                     limit ${BATCH} for update skip locked)
        returning *`.execute(trx);
      // A seller in both lists gets one event per change; the later revision is the one consumers keep.
      for (const row of [...payouts.rows, ...overlaps.rows]) await publishSellerUpdated(trx, row, now);
    });
  }
}
