import { randomBytes, randomInt } from 'node:crypto';
import { HttpError } from '@paygate/http';
import { formatUsdcExact } from '@paygate/money';
import { sql } from 'kysely';
import type { CheckoutConfig } from '../config';
import type { CheckoutDb, CheckoutTrx, SessionRow } from '../db';
import { CreateSessionStatement } from './create-statement';
import { RetryLaterError, type SessionLimits, sellerCaps, suffixRangeFor } from './limits';
import { enqueueSessionEvent, type SessionSnapshot, sessionEvent, toSnapshot } from './snapshot';

export interface NewSession {
  sellerId: string;
  skillId: string | null;
  skillName: string | null;
  endpointId: string | null;
  description: string;
  priceMicro: bigint;
  holdPeriodHours: number;
}

/** A created (or replayed) session and its public object, built once. */
export interface CreatedSession {
  session: SessionRow;
  snapshot: SessionSnapshot;
}

export interface IdempotencyClaim {
  key: string;
  requestHash: string;
}

/** How many times allocation retries when a concurrent insert took the amount it picked. */
const MAX_ALLOCATION_ATTEMPTS = 8;
const SWEEP_BATCH = 500;

export class AmountRangeExhaustedError extends RetryLaterError {
  constructor(priceMicro: bigint, capacity: number) {
    super(
      503,
      'amount_range_exhausted',
      `every one of the ${capacity} unique amounts for this price is held by a session that a payment could still match; retry later`,
      60,
      { field: 'amount', rule: 'no unique amount left for this price' },
    );
    void priceMicro;
  }
}

export function newSessionId(): string {
  return `cs_${randomBytes(16).toString('hex')}`;
}

/**
 * Sessions: creation with a unique exact amount, reads with lazy expiry, and the sweep that expires sessions
 * and releases amount reservations once no transfer can match them any more.
 */
export class SessionStore {
  private readonly createStatement: CreateSessionStatement;

  constructor(
    private readonly db: CheckoutDb,
    private readonly config: CheckoutConfig,
    /** Wakes the outbox relay after a write outside inTransaction (which would wake it itself). */
    private readonly onEventsEnqueued: () => void = () => undefined,
    /** Says which seller cap refused a creation (429); without it a refusal reads as a full range. */
    private readonly limits?: Pick<SessionLimits, 'admitSeller'>,
  ) {
    this.createStatement = new CreateSessionStatement(config);
  }

  /** Number of distinct suffixes of a price (1 .. range-1; the range grows with the price, see limits.ts). */
  capacity(priceMicro: bigint): number {
    return suffixRangeFor(this.config, priceMicro) - 1;
  }

  /** The session an earlier request with this Idempotency-Key created (409 if its body differed), if any. */
  replay(sellerId: string, claim: IdempotencyClaim): Promise<SessionRow | undefined> {
    return this.findIdempotent(sellerId, claim);
  }

  /**
   * One statement (so one round trip and one commit): inserts a session whose exact amount is price + a
   * suffix not reserved by any matchable session, its idempotency record, and its checkout.session_created
   * event into the outbox. The partial unique index decides the amount; the query starts at a random suffix
   * and takes the first free one after it, so a nearly full range costs a few index probes inside the
   * statement, not a round trip per guess. The event is built and validated here with a stand-in amount;
   * the statement writes the allocated amount into it (formatted like formatUsdcExact). Undefined: no
   * amount was free, or a concurrent insert took the one picked (nothing was written).
   */
  async insertWithUniqueAmount(
    input: NewSession,
    idempotency?: IdempotencyClaim,
  ): Promise<CreatedSession | undefined> {
    const now = this.config.now();
    const expiresAt = new Date(now.getTime() + this.config.sessionTtlSeconds * 1000);
    const lateUntil = new Date(expiresAt.getTime() + this.config.lateWindowSeconds * 1000);
    const sessionId = newSessionId();
    const row: SessionRow = {
      session_id: sessionId,
      seller_id: input.sellerId,
      skill_id: input.skillId,
      skill_name: input.skillName,
      endpoint_id: input.endpointId,
      description: input.description,
      price_micro: input.priceMicro,
      exact_amount_micro: input.priceMicro + 1n, // stand-in; replaced by the allocated amount
      status: 'open',
      hold_period_hours: input.holdPeriodHours,
      created_at: now,
      expires_at: expiresAt,
      late_until: lateUntil,
      amount_reserved: true,
      paid_amount_micro: null,
      transfer_id: null,
      tx_hash: null,
      payer: null,
      paid_at: null,
      updated_at: now,
    };
    const event = sessionEvent('checkout.session_created', row, this.config);
    const exactAmountMicro = await this.createStatement.execute({
      sessionId,
      sellerId: input.sellerId,
      skillId: input.skillId,
      skillName: input.skillName,
      endpointId: input.endpointId,
      description: input.description,
      priceMicro: input.priceMicro,
      holdPeriodHours: input.holdPeriodHours,
      now,
      expiresAt,
      lateUntil,
      start: randomInt(0, this.capacity(input.priceMicro)),
      rangeSize: this.capacity(input.priceMicro),
      eventId: event.id,
      eventType: event.type,
      eventJson: JSON.stringify(event),
      ...sellerCaps(this.config, input.priceMicro),
      idempotency,
    });
    if (exactAmountMicro === undefined) return undefined;
    row.exact_amount_micro = exactAmountMicro;
    // The event's snapshot is the response: only the amount differs from what was validated.
    const snapshot = event.data;
    snapshot.exactAmount = formatUsdcExact(exactAmountMicro);
    return { session: row, snapshot };
  }

  /** Opens the creation pool's connections before the first request. */
  warm(): Promise<void> {
    return this.createStatement.warm();
  }

  async close(): Promise<void> {
    await this.createStatement.close();
  }

  /** Creates a session (and its idempotency record) and enqueues checkout.session_created, in one statement. */
  async create(
    input: NewSession,
    idempotency: IdempotencyClaim | undefined,
  ): Promise<CreatedSession & { replayed: boolean }> {
    // No lookup first: the statement itself fails on a known Idempotency-Key (and writes nothing), so a new
    // request costs one round trip and only a retry pays for the lookup.
    let swept = false;
    for (let attempt = 1; attempt <= MAX_ALLOCATION_ATTEMPTS; attempt++) {
      try {
        const created = await this.insertWithUniqueAmount(input, idempotency);
        if (created) {
          this.onEventsEnqueued();
          return { ...created, replayed: false };
        }
        // Nothing inserted, so the key was not checked: a retry must replay even when the range is full.
        if (idempotency && attempt === 1) {
          const previous = await this.findIdempotent(input.sellerId, idempotency);
          if (previous)
            return { session: previous, snapshot: toSnapshot(previous, this.config), replayed: true };
        }
        // A seller cap reached: 429 with its reason (a full range is decided below).
        await this.limits?.admitSeller(input.sellerId, input.priceMicro, input.skillId ? 'skill' : 'amount');
        // Nothing free (or a concurrent insert won the amount we picked): release what has lapsed, try again.
        const free = await this.hasFreeAmount(input.priceMicro);
        if (!free) {
          if (swept) throw new AmountRangeExhaustedError(input.priceMicro, this.capacity(input.priceMicro));
          swept = true;
          await this.releaseLapsedReservationsOf(input.priceMicro);
        }
      } catch (error) {
        if (idempotency && isUniqueViolation(error, 'idempotency_keys_pkey')) {
          const previous = await this.findIdempotent(input.sellerId, idempotency);
          if (previous)
            return { session: previous, snapshot: toSnapshot(previous, this.config), replayed: true };
        }
        throw error;
      }
    }
    throw new AmountRangeExhaustedError(input.priceMicro, this.capacity(input.priceMicro));
  }

  private async hasFreeAmount(priceMicro: bigint): Promise<boolean> {
    const row = await this.db
      .selectFrom('sessions')
      .select((eb) => eb.fn.countAll<bigint>().as('taken'))
      .where('amount_reserved', '=', true)
      .where('exact_amount_micro', '>', priceMicro)
      .where('exact_amount_micro', '<', priceMicro + BigInt(suffixRangeFor(this.config, priceMicro)))
      .executeTakeFirstOrThrow();
    return BigInt(row.taken) < BigInt(this.capacity(priceMicro));
  }

  /** Same key and same body: the same session. Same key, other body: 409 idempotency_key_reused. */
  private async findIdempotent(sellerId: string, claim: IdempotencyClaim): Promise<SessionRow | undefined> {
    const previous = await this.db
      .selectFrom('idempotency_keys')
      .select(['request_hash', 'session_id'])
      .where('seller_id', '=', sellerId)
      .where('idempotency_key', '=', claim.key)
      .executeTakeFirst();
    if (!previous) return undefined;
    if (previous.request_hash !== claim.requestHash) {
      throw new HttpError(
        409,
        'idempotency_key_reused',
        'this Idempotency-Key was used with a different request body',
        { field: 'Idempotency-Key', rule: 'must not be reused with a different body' },
      );
    }
    return this.db
      .selectFrom('sessions')
      .selectAll()
      .where('session_id', '=', previous.session_id)
      .executeTakeFirstOrThrow();
  }

  /** Reads a session; an open session past its expiry is expired on the spot (with its event). */
  async get(
    sessionId: string,
    inTransaction: <T>(fn: (trx: CheckoutTrx) => Promise<T>) => Promise<T>,
  ): Promise<SessionRow | undefined> {
    const row = await this.db
      .selectFrom('sessions')
      .selectAll()
      .where('session_id', '=', sessionId)
      .executeTakeFirst();
    if (row?.status !== 'open' || row.expires_at > this.config.now()) return row;
    await this.expireDue(inTransaction, sessionId);
    return this.db.selectFrom('sessions').selectAll().where('session_id', '=', sessionId).executeTakeFirst();
  }

  /** Expires open sessions past expiresAt (one, or a bounded batch), each with checkout.session_expired. */
  async expireDue(
    inTransaction: <T>(fn: (trx: CheckoutTrx) => Promise<T>) => Promise<T>,
    onlySessionId?: string,
  ): Promise<number> {
    return inTransaction(async (trx) => {
      const now = this.config.now();
      let query = trx
        .selectFrom('sessions')
        .select('session_id')
        .where('status', '=', 'open')
        .where('expires_at', '<=', now)
        .orderBy('expires_at')
        .limit(SWEEP_BATCH)
        .forUpdate();
      // The sweeper skips rows another transaction holds; a read of one session waits for it instead.
      query = onlySessionId ? query.where('session_id', '=', onlySessionId) : query.skipLocked();
      const due = await query.execute();
      if (due.length === 0) return 0;
      const rows = await trx
        .updateTable('sessions')
        .set({ status: 'expired', updated_at: now })
        .where(
          'session_id',
          'in',
          due.map((d) => d.session_id),
        )
        .returningAll()
        .execute();
      for (const row of rows) await enqueueSessionEvent(trx, 'checkout.session_expired', row, this.config);
      return rows.length;
    });
  }

  /**
   * The request path's release: only this price's range, and waiting for rows the sweeper holds (its
   * skip-locked pass must not make a request see a full range that is being freed).
   */
  private async releaseLapsedReservationsOf(priceMicro: bigint): Promise<void> {
    await sql`
      update sessions set amount_reserved = false
      where amount_reserved and late_until <= ${this.config.now()}
        and exact_amount_micro > ${priceMicro}::bigint
        and exact_amount_micro < ${priceMicro}::bigint + ${suffixRangeFor(this.config, priceMicro)}::bigint`.execute(
      this.db,
    );
  }

  /** Frees the amounts of sessions whose late window has passed: no transfer can match them any more. */
  async releaseLapsedReservations(
    inTransaction: <T>(fn: (trx: CheckoutTrx) => Promise<T>) => Promise<T>,
  ): Promise<number> {
    return inTransaction(async (trx) => {
      const result = await sql`
        update sessions set amount_reserved = false
        where session_id in (
          select session_id from sessions where amount_reserved and late_until <= ${this.config.now()}
          order by late_until limit ${SWEEP_BATCH} for update skip locked
        )`.execute(trx);
      return Number(result.numAffectedRows ?? 0n);
    });
  }
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = error as { code?: string; constraint?: string };
  return e?.code === '23505' && (!constraint || e.constraint === constraint);
}
