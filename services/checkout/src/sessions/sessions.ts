import { randomBytes } from 'node:crypto';
import { createEvent } from '@paygate/contracts';
import { refuseOtherRequest } from '@paygate/http';
import { currentTraceCarrier } from '@paygate/telemetry';
import { sql } from 'kysely';
import type { CheckoutConfig } from '../config';
import { type CheckoutDb, type CheckoutTrx, type SessionRow, UNPAID_SESSION } from '../db';
import { CreateSessionStatement } from './create-statement';
import { DepositAddressAllocator, depositNode, displayAddress } from './deposit-addresses';
import { RetryLaterError, type SessionLimits } from './limits';
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

const SWEEP_BATCH = 500;

export function newSessionId(): string {
  return `cs_${randomBytes(16).toString('hex')}`;
}

/**
 * Sessions: creation with the session's own deposit address, reads with lazy expiry, and the sweep that expires
 * sessions (and releases the amounts that sessions from before deposit addresses still reserve).
 */
export class SessionStore {
  private readonly createStatement: CreateSessionStatement;
  private readonly addresses: DepositAddressAllocator;

  constructor(
    private readonly db: CheckoutDb,
    private readonly config: CheckoutConfig,
    /** Wakes the outbox relay after a write outside inTransaction (which would wake it itself). */
    private readonly onEventsEnqueued: () => void = () => undefined,
    /** Says why a creation was refused (429 too_many_open_sessions). */
    private readonly limits?: Pick<SessionLimits, 'admitSeller'>,
  ) {
    this.createStatement = new CreateSessionStatement(config);
    this.addresses = new DepositAddressAllocator(db, depositNode(config.depositXpub));
  }

  /** The session an earlier request with this Idempotency-Key created (409 if its body differed), if any. */
  replay(sellerId: string, claim: IdempotencyClaim): Promise<SessionRow | undefined> {
    return this.findIdempotent(sellerId, claim);
  }

  /**
   * One statement (so one round trip and one commit): inserts a session paid to its own deposit address at
   * exactly its price, its idempotency record, and its checkout.session_created and deposit.address_assigned
   * events into the outbox. No amount is shared with any other session, so nothing can run out. Undefined: the
   * seller's open-session cap was reached (nothing was written).
   */
  async insertSession(
    input: NewSession,
    idempotency?: IdempotencyClaim,
  ): Promise<CreatedSession | undefined> {
    const now = this.config.now();
    const expiresAt = new Date(now.getTime() + this.config.sessionTtlSeconds * 1000);
    const lateUntil = new Date(expiresAt.getTime() + this.config.lateWindowSeconds * 1000);
    const watchUntil = new Date(lateUntil.getTime() + this.config.depositWatchGraceSeconds * 1000);
    const sessionId = newSessionId();
    const deposit = await this.addresses.assign();
    const row: SessionRow = {
      session_id: sessionId,
      seller_id: input.sellerId,
      skill_id: input.skillId,
      skill_name: input.skillName,
      endpoint_id: input.endpointId,
      description: input.description,
      price_micro: input.priceMicro,
      exact_amount_micro: input.priceMicro,
      status: 'open',
      hold_period_hours: input.holdPeriodHours,
      created_at: now,
      expires_at: expiresAt,
      late_until: lateUntil,
      amount_reserved: false,
      ...UNPAID_SESSION,
      updated_at: now,
      deposit_address: deposit.address,
      derivation_index: BigInt(deposit.index),
    };
    const event = sessionEvent('checkout.session_created', row, this.config);
    const assigned = createEvent(
      'deposit.address_assigned',
      'checkout',
      {
        sessionId,
        address: displayAddress(deposit.address),
        derivationIndex: deposit.index,
        chainId: this.config.chainId,
        assignedAt: now.toISOString(),
        watchUntil: watchUntil.toISOString(),
      },
      { trace: currentTraceCarrier() },
    );
    const inserted = await this.createStatement.execute({
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
      depositAddress: deposit.address,
      derivationIndex: deposit.index,
      maxOpenSessions: this.config.maxOpenSessionsPerSeller,
      sessionEvent: { id: event.id, type: event.type, json: JSON.stringify(event) },
      addressEvent: { id: assigned.id, type: assigned.type, json: JSON.stringify(assigned) },
      idempotency,
    });
    if (!inserted) return undefined;
    return { session: row, snapshot: event.data };
  }

  /** Opens the creation pool's connections before the first request. */
  warm(): Promise<void> {
    return this.createStatement.warm();
  }

  async close(): Promise<void> {
    await this.createStatement.close();
  }

  /** Creates a session (and its idempotency record) and enqueues its events, in one statement. */
  async create(
    input: NewSession,
    idempotency: IdempotencyClaim | undefined,
  ): Promise<CreatedSession & { replayed: boolean }> {
    // No lookup first: the statement itself fails on a known Idempotency-Key (and writes nothing), so a new
    // request costs one round trip and only a retry pays for the lookup.
    try {
      const created = await this.insertSession(input, idempotency);
      if (created) {
        this.onEventsEnqueued();
        return { ...created, replayed: false };
      }
      // Nothing inserted, so the key was not checked: a retry must replay even when the seller is at its cap.
      if (idempotency) {
        const previous = await this.findIdempotent(input.sellerId, idempotency);
        if (previous)
          return { session: previous, snapshot: toSnapshot(previous, this.config), replayed: true };
      }
      await this.limits?.admitSeller(input.sellerId);
      throw new RetryLaterError(503, 'session_not_created', 'the session could not be created; retry', 1);
    } catch (error) {
      if (idempotency && isUniqueViolation(error, 'idempotency_keys_pkey')) {
        const previous = await this.findIdempotent(input.sellerId, idempotency);
        if (previous)
          return { session: previous, snapshot: toSnapshot(previous, this.config), replayed: true };
      }
      throw error;
    }
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
    refuseOtherRequest(previous.request_hash, claim.requestHash);
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
   * Frees the amounts that sessions from before deposit addresses reserve at the old shared wallet, once their
   * late window has passed (new sessions reserve none).
   */
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
