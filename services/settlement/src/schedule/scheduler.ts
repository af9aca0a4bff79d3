import { formatUsdc, parseUsdc } from '@paygate/money';
import {
  type BackgroundTask,
  type BackoffPolicy,
  backoffDelayMs,
  PolledTask,
  PollingLoop,
  type ServiceContext,
} from '@paygate/runtime';
import type { Insertable, Selectable, Transaction } from 'kysely';
import type { Clock } from '../clock';
import type { SettlementConfig } from '../config';
import type { Frequency, SellersTable, SettlementDB, SettlementsTable } from '../db';
import { type LedgerClient, parseSignedUsdc } from '../ledger/client';
import type { SettlementMetrics } from '../metrics';
import { cancelFailedPlatformPayouts } from '../platform/payouts';
import type { EscrowChain } from '../transfers/chain';
import { recordTransfer } from '../transfers/repository';
import { type Period, periodAt, settlementIdFor } from './periods';

/** A `pending` settlement of the seller for the period (its id derived from both). */
export function newSettlementRow(
  seller: Selectable<SellersTable>,
  period: Period,
  now: Date,
): Insertable<SettlementsTable> {
  return {
    settlement_id: settlementIdFor(seller.seller_id, period),
    seller_id: seller.seller_id,
    period_key: period.key,
    frequency: period.frequency,
    period_start: period.start,
    period_end: period.end,
    status: 'pending',
    minimum_micro: seller.minimum_settlement_micro,
    available_micro: null,
    amount_micro: null,
    payout_address: seller.payout_address,
    transfer_id: null,
    tx_hash: null,
    skip_reason: null,
    failure_reason: null,
    cancel_acknowledged_at: null,
    recorded_acknowledged_at: null,
    created_at: now,
    updated_at: now,
    completed_at: null,
  };
}

/** The ledger's answer when it reserves nothing (below the minimum, nothing available, or given back already). */
type ReserveRefusal = Extract<Awaited<ReturnType<LedgerClient['reservePayout']>>, { ok: false }>;

const SELLER_BATCH = 100;
const MAX_SELLER_BATCHES = 20;
const PENDING_BATCH = 20;
const MAX_PENDING_BATCHES = 10;
/**
 * Recorded payouts whose acknowledgement the ledger did not answer, told again per pass at most: a pass each
 * SCHEDULER_INTERVAL_MS (1 min) tells 500 within the ledger's PAYOUT_UNCLAIMED_AFTER_MS (10 min).
 */
const UNACKNOWLEDGED_BATCH = 50;
/**
 * Retries of a reservation the ledger did not answer: 2 s, 4 s, ... up to 10 min, at the ceiling of the shared
 * backoff (no jitter): a pass reserves its due settlements one at a time, so there is no burst for jitter to spread,
 * and a payout is not postponed further at random.
 */
const RESERVE_RETRY_BACKOFF: BackoffPolicy = { baseMs: 2000, maxMs: 10 * 60_000 };
const AT_CEILING = () => 1;

/**
 * Creates one settlement per seller and period when the period is due, asks the ledger to reserve the seller's
 * available balance (at least its minimum), and records the payout transfer. Safe with several replicas: due
 * sellers and pending settlements are claimed with FOR UPDATE SKIP LOCKED, settlement ids are deterministic per
 * (seller, period) and unique, and the ledger's reservation is idempotent per settlementId.
 */
export class SettlementScheduler extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    private readonly config: SettlementConfig,
    private readonly clock: Clock,
    private readonly ledger: LedgerClient,
    private readonly chain: EscrowChain,
    private readonly metrics: SettlementMetrics,
    private readonly onTransferRecorded: () => void,
  ) {
    super();
    this.loop = new PollingLoop(() => this.runOnce(), {
      what: 'settlement scheduler pass',
      logger: ctx.logger,
      intervalMs: config.schedulerIntervalMs,
    });
  }

  /** The seller's period at `at` (the development SETTLEMENT_PERIOD_SECONDS replaces the real ones). */
  periodAt(frequency: Frequency, at: Date): Period {
    return periodAt(frequency, at, this.config.settlementPeriodSeconds);
  }

  /** One bounded pass; tests call it directly after moving the clock. */
  async runOnce(): Promise<void> {
    await this.createDueSettlements();
    // Before this pass records new payouts: an acknowledgement not answered is sent again a pass later, not at once.
    await this.acknowledgeUnanswered();
    await this.reservePending();
    await this.cancelFailed();
    await cancelFailedPlatformPayouts(this.ctx, this.ledger, this.clock);
  }

  async createDueSettlements(): Promise<number> {
    const now = this.clock();
    const periods: Record<Frequency, Period> = {
      DAILY: this.periodAt('DAILY', now),
      WEEKLY: this.periodAt('WEEKLY', now),
      MONTHLY: this.periodAt('MONTHLY', now),
    };
    let created = 0;
    for (let batch = 0; batch < MAX_SELLER_BATCHES && !this.loop.isStopped; batch++) {
      const claimed = await this.ctx.inTransaction(async (trx) => {
        const sellers = await trx
          .selectFrom('sellers')
          .selectAll()
          .where((eb) =>
            eb.or(
              (Object.keys(periods) as Frequency[]).map((frequency) =>
                eb.and([
                  eb('settlement_frequency', '=', frequency),
                  eb('last_scheduled_period', '<', periods[frequency].key),
                ]),
              ),
            ),
          )
          .orderBy('seller_id')
          .limit(SELLER_BATCH)
          .forUpdate()
          .skipLocked()
          .execute();
        for (const seller of sellers) {
          const period = periods[seller.settlement_frequency];
          const inserted = await trx
            .insertInto('settlements')
            .values(newSettlementRow(seller, period, now))
            .onConflict((oc) => oc.columns(['seller_id', 'period_key']).doNothing())
            .executeTakeFirst();
          created += Number(inserted.numInsertedOrUpdatedRows ?? 0n);
          await trx
            .updateTable('sellers')
            .set({ last_scheduled_period: period.key })
            .where('seller_id', '=', seller.seller_id)
            .execute();
        }
        return sellers.length;
      });
      if (claimed < SELLER_BATCH) break;
    }
    return created;
  }

  async reservePending(): Promise<void> {
    const recorded: string[] = [];
    for (let batch = 0; batch < MAX_PENDING_BATCHES && !this.loop.isStopped; batch++) {
      const claimed = await this.ctx.inTransaction(async (trx) => {
        const pending = await trx
          .selectFrom('settlements')
          .selectAll()
          .where('status', '=', 'pending')
          .where('next_attempt_at', '<=', new Date())
          .orderBy('settlement_id')
          .limit(PENDING_BATCH)
          .forUpdate()
          .skipLocked()
          .execute();
        for (const settlement of pending) {
          if ((await this.reserve(trx, settlement)) === 'recorded') recorded.push(settlement.settlement_id);
        }
        return pending.length;
      });
      if (claimed < PENDING_BATCH) break;
    }
    if (recorded.length > 0) {
      this.onTransferRecorded();
      await this.acknowledgeRecorded(recorded);
    }
  }

  /**
   * Tells the ledger these payouts are recorded, once the transaction that recorded them committed
   * (`ledger.reserve_payout` asked again with `recorded`): their reservations are then never cancelled as lost
   * answers, however long the payouts wait behind other transfers to be signed. One the ledger does not answer is
   * told again by the next passes (acknowledgeUnanswered).
   */
  async acknowledgeRecorded(settlementIds: string[]): Promise<void> {
    if (settlementIds.length === 0) return;
    const recorded = await this.unacknowledgedPayouts().where('settlement_id', 'in', settlementIds).execute();
    for (const payout of recorded) await this.acknowledge(payout);
  }

  /**
   * Tells the ledger again, bounded (UNACKNOWLEDGED_BATCH), of recorded payouts whose acknowledgement it did not
   * answer and that are not signed yet: signing comes after ledger.authorize_transfer, which claims the
   * reservation as surely as the acknowledgement.
   */
  async acknowledgeUnanswered(): Promise<void> {
    const unsigned = await this.unacknowledgedPayouts()
      .where('transfer_id', 'in', (eb) =>
        eb.selectFrom('outgoing_transfers').select('transfer_id').where('status', '=', 'created'),
      )
      .orderBy('settlement_id')
      .limit(UNACKNOWLEDGED_BATCH)
      .execute();
    for (const payout of unsigned) await this.acknowledge(payout);
  }

  private unacknowledgedPayouts() {
    return this.ctx.db
      .selectFrom('settlements')
      .select(['settlement_id', 'seller_id', 'minimum_micro', 'payout_address'])
      .where('status', '=', 'sending')
      .where('recorded_acknowledged_at', 'is', null);
  }

  /** One acknowledgement; kept as answered once the ledger answers it, whatever it says. */
  private async acknowledge(
    payout: Pick<
      Selectable<SettlementsTable>,
      'settlement_id' | 'seller_id' | 'minimum_micro' | 'payout_address'
    >,
  ): Promise<void> {
    const settlementId = payout.settlement_id;
    let reply: Awaited<ReturnType<LedgerClient['reservePayout']>>;
    try {
      reply = await this.ledger.reservePayout({
        settlementId,
        sellerId: payout.seller_id,
        minimumAmount: formatUsdc(payout.minimum_micro),
        payoutAddress: payout.payout_address,
        recorded: true,
      });
    } catch (error) {
      this.ctx.logger.warn(
        { settlementId, err: error },
        'the ledger did not answer that a payout is recorded; the next scheduler pass tells it again',
      );
      return;
    }
    if (!reply.ok) {
      // Given back before it heard of the payout: authorize_transfer refuses it and it fails unsent.
      this.ctx.logger.error(
        { settlementId, reason: reply.reason },
        'the ledger no longer holds a recorded payout',
      );
    }
    await this.ctx.db
      .updateTable('settlements')
      .set({ recorded_acknowledged_at: this.clock() })
      .where('settlement_id', '=', settlementId)
      .execute();
  }

  /**
   * Asks the ledger to reserve one pending settlement (its row locked by the caller's transaction) and records
   * the payout transfer: `recorded` (now sending), `skipped` (below the minimum or nothing available) or `retry`
   * (the ledger did not answer; still pending, retried with backoff).
   */
  async reserve(
    trx: Transaction<SettlementDB>,
    settlement: Selectable<SettlementsTable>,
  ): Promise<'recorded' | 'skipped' | 'retry'> {
    const now = this.clock();
    // The payout goes to the seller's current payout address, not the one it had when the period opened.
    const seller = await trx
      .selectFrom('sellers')
      .select('payout_address')
      .where('seller_id', '=', settlement.seller_id)
      .executeTakeFirst();
    const payoutAddress = seller?.payout_address ?? settlement.payout_address;
    let amountMicro: bigint;
    try {
      const reply = await this.ledger.reservePayout({
        settlementId: settlement.settlement_id,
        sellerId: settlement.seller_id,
        minimumAmount: formatUsdc(settlement.minimum_micro),
        payoutAddress,
      });
      if (!reply.ok) {
        await this.markSkipped(trx, settlement, reply, now);
        return 'skipped';
      }
      amountMicro = parseUsdc(reply.amount);
      if (amountMicro <= 0n) throw new Error(`ledger reserved a non-positive amount ${reply.amount}`);
    } catch (error) {
      await this.postponeReservation(trx, settlement, now, error);
      return 'retry';
    }
    const transferId = await recordTransfer(trx, {
      kind: 'payout',
      idempotencyKey: settlement.settlement_id,
      chainId: this.config.chainId,
      tokenAddress: this.chain.usdcAddress,
      fromAddress: this.chain.address,
      toAddress: payoutAddress,
      amountMicro,
    });
    await trx
      .updateTable('settlements')
      .set({
        status: 'sending',
        amount_micro: amountMicro,
        transfer_id: transferId,
        payout_address: payoutAddress,
        updated_at: now,
      })
      .where('settlement_id', '=', settlement.settlement_id)
      .execute();
    return 'recorded';
  }

  /**
   * Below the minimum, or nothing available: skipped; the balance accumulates to the next period. Likewise when the
   * ledger already gave this settlement's reservation back (`reservation_cancelled`: asked again after its sweep):
   * a payout recorded now would be refused by authorize_transfer, and the money is available to a later one.
   */
  private async markSkipped(
    trx: Transaction<SettlementDB>,
    settlement: Selectable<SettlementsTable>,
    reply: ReserveRefusal,
    now: Date,
  ): Promise<void> {
    const available = 'available' in reply ? reply.available : null;
    await trx
      .updateTable('settlements')
      .set({
        status: 'skipped',
        skip_reason: reply.reason,
        available_micro: available === null ? null : parseSignedUsdc(available),
        updated_at: now,
      })
      .where('settlement_id', '=', settlement.settlement_id)
      .execute();
    this.metrics.settlementsSkipped.inc({ reason: reply.reason });
    this.ctx.logger.info(
      { settlementId: settlement.settlement_id, reason: reply.reason, available },
      'settlement skipped; the balance accumulates to the next period',
    );
  }

  /** The ledger did not answer (or answered nonsense): still pending, asked again after the backoff. */
  private async postponeReservation(
    trx: Transaction<SettlementDB>,
    settlement: Selectable<SettlementsTable>,
    now: Date,
    error: unknown,
  ): Promise<void> {
    const attempts = settlement.attempts + 1;
    const delayMs = backoffDelayMs(attempts, RESERVE_RETRY_BACKOFF, AT_CEILING)!;
    await trx
      .updateTable('settlements')
      .set({ attempts, next_attempt_at: new Date(Date.now() + delayMs), updated_at: now })
      .where('settlement_id', '=', settlement.settlement_id)
      .execute();
    this.ctx.logger.warn(
      { settlementId: settlement.settlement_id, attempts, err: error },
      'could not reserve the payout with the ledger; will retry',
    );
  }

  /** A payout that can never be sent gives its reservation back to the seller's available balance. */
  async cancelFailed(): Promise<void> {
    const failed = await this.ctx.db
      .selectFrom('settlements')
      .select(['settlement_id'])
      .where('status', '=', 'failed')
      .where('cancel_acknowledged_at', 'is', null)
      .orderBy('settlement_id')
      .limit(PENDING_BATCH)
      .execute();
    for (const { settlement_id } of failed) {
      try {
        const reply = await this.ledger.cancelPayout({ settlementId: settlement_id });
        if (!reply.ok && reply.reason === 'already_completed') {
          // The ledger booked this payout as paid while our transfer failed: an operator must look.
          this.ctx.logger.error({ settlementId: settlement_id }, 'ledger says a failed payout completed');
        } else if (!reply.ok && reply.reason !== 'unknown_settlement') {
          // unknown_settlement: nothing was reserved, so there is nothing to give back.
          throw new Error(`ledger refused: ${reply.reason}`);
        }
        await this.ctx.db
          .updateTable('settlements')
          .set({ cancel_acknowledged_at: this.clock(), updated_at: this.clock() })
          .where('settlement_id', '=', settlement_id)
          .execute();
      } catch (error) {
        this.ctx.logger.warn({ settlementId: settlement_id, err: error }, 'cancel_payout failed; will retry');
      }
    }
  }
}
