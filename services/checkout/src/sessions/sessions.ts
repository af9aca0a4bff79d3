import { randomBytes, randomInt } from 'node:crypto';
import { type CheckoutMatchingMode, createEvent } from '@paygate/contracts';
import { refuseOtherRequest } from '@paygate/http';
import { formatUsdcExact, MAX_AMOUNT_MICRO } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import { currentTraceCarrier } from '@paygate/telemetry';
import { getAddress } from 'ethers';
import { sql } from 'kysely';
import type { CheckoutConfig } from '../config';
import { type CheckoutDatabase, type SessionRow, UNPAID_SESSION } from '../db';
import { RetryLaterError } from '../errors';
import { CheckoutReason } from '../reasons';
import { CreateSessionStatement } from './create-statement';
import { DepositAddressAllocator, depositNode } from './deposit-addresses';
import type { SessionLimits } from './limits';
import { enqueueSessionEvent, type SessionSnapshot, sessionEvent, toSnapshot } from './snapshot';

export interface NewSession {
  sellerId: string;
  skillId: string | null;
  skillName: string | null;
  endpointId: string | null;
  description: string;
  priceMicro: bigint;
  holdPeriodHours: number;
  /** The seller's choice: a unique amount on the checkout wallet, or a deposit address per session. */
  matching: CheckoutMatchingMode;
}

/** A created (or replayed) session and its public object, built once. */
interface CreatedSession {
  session: SessionRow;
  snapshot: SessionSnapshot;
}

export interface IdempotencyClaim {
  key: string;
  requestHash: string;
}

const SWEEP_BATCH = 500;

const newSessionId = () => `cs_${randomBytes(16).toString('hex')}`;

/** How many times amount allocation runs when a concurrent insert took the amount it picked. */
const MAX_ALLOCATION_ATTEMPTS = 4;

/** Why a session of the amount mode was given a deposit address instead (logged, and counted in tests). */
type AmountFallbackReason = 'price_crowded' | 'seller_share' | 'contention' | 'amount_at_limit';

/** Sessions: creation, reads with lazy expiry, and the sweep that expires them and releases their amounts. */
export class SessionStore {
  private readonly createStatement: CreateSessionStatement;
  private readonly addresses: DepositAddressAllocator;
  /** The number of suffixes of a price (1 .. n micro-USDC) and a seller's cap among them (0: none). */
  private readonly capacity: { suffixes: number; share: number };

  constructor(
    private readonly ctx: ServiceContext<CheckoutDatabase>,
    private readonly config: CheckoutConfig,
    /** Says why a creation was refused (429 too_many_open_sessions). */
    private readonly limits?: Pick<SessionLimits, 'admitSeller'>,
  ) {
    this.createStatement = new CreateSessionStatement(config);
    this.addresses = new DepositAddressAllocator(ctx.db, depositNode(config.depositXpub));
    const suffixes = config.amountSuffixRangeMicro - 1;
    const { maxAmountSharePercent: percent } = config;
    const share = percent >= 100 ? 0 : Math.max(1, Math.floor((suffixes * percent) / 100));
    this.capacity = { suffixes, share };
  }

  private newRow(input: NewSession): SessionRow {
    const now = this.config.now();
    const expiresAt = new Date(now.getTime() + this.config.sessionTtlSeconds * 1000);
    return {
      session_id: newSessionId(),
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
      late_until: new Date(expiresAt.getTime() + this.config.lateWindowSeconds * 1000),
      amount_reserved: false,
      ...UNPAID_SESSION,
      updated_at: now,
      deposit_address: null,
      derivation_index: null,
    };
  }

  /**
   * One statement (one round trip): the session at price + the first free suffix after a random start, its
   * idempotency record and event. Undefined when a cap, a full price or a race left nothing written.
   */
  private async insertWithUniqueAmount(
    input: NewSession,
    idempotency?: IdempotencyClaim,
  ): Promise<CreatedSession | undefined> {
    const row = this.newRow(input);
    row.exact_amount_micro = input.priceMicro + 1n; // stand-in; replaced by the allocated amount
    row.amount_reserved = true;
    const event = sessionEvent('checkout.session_created', row, this.config);
    const exactAmountMicro = await this.createStatement.executeAmount({
      row,
      idempotency,
      start: randomInt(0, this.capacity.suffixes),
      suffixes: this.capacity.suffixes,
      maxHeldAmounts: this.capacity.share,
      sessionEvent: event,
    });
    if (exactAmountMicro === undefined) return undefined;
    row.exact_amount_micro = exactAmountMicro;
    // The event's snapshot is the response: only the amount differs from what was validated.
    const snapshot = event.data;
    snapshot.exactAmount = formatUsdcExact(exactAmountMicro);
    return { session: row, snapshot };
  }

  /** One statement: the session at its own deposit address, its record and both events; undefined at the cap. */
  private async insertAtDepositAddress(
    input: NewSession,
    idempotency?: IdempotencyClaim,
  ): Promise<CreatedSession | undefined> {
    const row = this.newRow(input);
    const deposit = await this.addresses.assign();
    row.deposit_address = deposit.address;
    row.derivation_index = BigInt(deposit.index);
    const watchUntil = new Date(row.late_until.getTime() + this.config.depositWatchGraceSeconds * 1000);
    const event = sessionEvent('checkout.session_created', row, this.config);
    const assigned = createEvent(
      'deposit.address_assigned',
      'checkout',
      {
        sessionId: row.session_id,
        address: getAddress(deposit.address),
        derivationIndex: deposit.index,
        chainId: this.config.chainId,
        assignedAt: row.created_at.toISOString(),
        watchUntil: watchUntil.toISOString(),
      },
      { trace: currentTraceCarrier() },
    );
    const inserted = await this.createStatement.executeDeposit({
      row,
      idempotency,
      sessionEvent: event,
      addressEvent: assigned,
    });
    if (!inserted) return undefined;
    return { session: row, snapshot: event.data };
  }

  warm(): Promise<void> {
    return this.createStatement.warm();
  }

  async close(): Promise<void> {
    await this.createStatement.close();
  }

  /** Creates a session by unique amount, or at a deposit address when chosen or when the price is crowded. */
  async create(
    input: NewSession,
    idempotency: IdempotencyClaim | undefined,
  ): Promise<CreatedSession & { replayed: boolean }> {
    // No lookup first: the statement itself fails on a known Idempotency-Key (and writes nothing), so a new
    // request costs one round trip and only a retry pays for the lookup.
    try {
      if (input.matching === 'amount') {
        const created = await this.createByAmount(input, idempotency);
        if (typeof created === 'object') {
          // Written outside inTransaction (which would wake the outbox relay itself).
          if (!created.replayed) this.ctx.relay.kick();
          return created;
        }
        this.ctx.logger.info(
          { sellerId: input.sellerId, price: formatUsdcExact(input.priceMicro), reason: created },
          'no unique amount for this session; it is paid at its own deposit address',
        );
      }
      const created = await this.insertAtDepositAddress(input, idempotency);
      if (created) {
        this.ctx.relay.kick();
        return { ...created, replayed: false };
      }
      // Nothing inserted, so the key was not checked: a retry must replay even when the seller is at its cap.
      const previous = await this.replayed(input, idempotency);
      if (previous) return previous;
      await this.limits?.admitSeller(input.sellerId);
      const message = 'the session could not be created; retry';
      throw new RetryLaterError(503, CheckoutReason.SessionNotCreated, message, 1);
    } catch (error) {
      if (idempotency && isUniqueViolation(error, 'idempotency_keys_pkey')) {
        const previous = await this.replayed(input, idempotency);
        if (previous) return previous;
      }
      throw error;
    }
  }

  /** Bounded amount allocation: a session, a replay, or why to fall back to a deposit address (429 at the cap). */
  private async createByAmount(
    input: NewSession,
    idempotency: IdempotencyClaim | undefined,
  ): Promise<(CreatedSession & { replayed: boolean }) | AmountFallbackReason> {
    // A suffix on top would pass the largest USDC amount any part of the system accepts.
    if (input.priceMicro + BigInt(this.capacity.suffixes) > MAX_AMOUNT_MICRO) return 'amount_at_limit';
    let released = false;
    for (let attempt = 1; attempt <= MAX_ALLOCATION_ATTEMPTS; attempt++) {
      const created = await this.insertWithUniqueAmount(input, idempotency);
      if (created) return { ...created, replayed: false };
      // Nothing inserted, so the key was not checked: a retry must replay even when the price is crowded.
      if (attempt === 1) {
        const previous = await this.replayed(input, idempotency);
        if (previous) return previous;
      }
      await this.limits?.admitSeller(input.sellerId);
      const { taken, held } = await this.amountsHeld(input.sellerId, input.priceMicro);
      if (this.capacity.share > 0 && held >= this.capacity.share) return 'seller_share';
      if (taken >= this.capacity.suffixes) {
        // The sweeper releases lapsed amounts every SWEEP_INTERVAL_MS; this price's may not have been yet.
        if (released || (await this.releaseLapsedReservations(input.priceMicro)) === 0)
          return 'price_crowded';
        released = true;
      }
      // Else a concurrent creation took the amount this one picked: try again from another start.
    }
    return 'contention';
  }

  /** This price's amounts held by matchable sessions, and how many of them the seller's unpaid sessions hold. */
  private async amountsHeld(sellerId: string, priceMicro: bigint): Promise<{ taken: number; held: number }> {
    const low = priceMicro + 1n;
    const high = priceMicro + BigInt(this.capacity.suffixes);
    const result = await sql<{ taken: string; held: string }>`
      select
        (select count(*) from sessions where amount_reserved and exact_amount_micro between ${low} and ${high}) as taken,
        (select count(*) from sessions where seller_id = ${sellerId} and amount_reserved and transfer_id is null
          and exact_amount_micro between ${low} and ${high}) as held`.execute(this.ctx.db);
    const row = result.rows[0]!;
    return { taken: Number(row.taken), held: Number(row.held) };
  }

  /** Same key and same body: the same session, replayed. Same key, other body: 409 idempotency_key_reused. */
  private async replayed(
    input: NewSession,
    claim: IdempotencyClaim | undefined,
  ): Promise<(CreatedSession & { replayed: true }) | undefined> {
    if (!claim) return undefined;
    const { db } = this.ctx;
    const previous = await db
      .selectFrom('idempotency_keys')
      .select(['request_hash', 'session_id'])
      .where('seller_id', '=', input.sellerId)
      .where('idempotency_key', '=', claim.key)
      .executeTakeFirst();
    if (!previous) return undefined;
    refuseOtherRequest(previous.request_hash, claim.requestHash);
    const session = await db
      .selectFrom('sessions')
      .selectAll()
      .where('session_id', '=', previous.session_id)
      .executeTakeFirstOrThrow();
    return { session, snapshot: toSnapshot(session, this.config), replayed: true };
  }

  /** Reads a session; an open session past its expiry is expired on the spot (with its event). */
  async get(sessionId: string): Promise<SessionRow | undefined> {
    const read = () =>
      this.ctx.db.selectFrom('sessions').selectAll().where('session_id', '=', sessionId).executeTakeFirst();
    const row = await read();
    if (row?.status !== 'open' || row.expires_at > this.config.now()) return row;
    await this.expireDue(sessionId);
    return read();
  }

  /** Expires open sessions past expiresAt (one, or a bounded batch), each with checkout.session_expired. */
  async expireDue(onlySessionId?: string): Promise<number> {
    return this.ctx.inTransaction(async (trx) => {
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
      const ids = due.map((d) => d.session_id);
      const rows = await trx
        .updateTable('sessions')
        .set({ status: 'expired', updated_at: now })
        .where('session_id', 'in', ids)
        .returningAll()
        .execute();
      for (const row of rows) await enqueueSessionEvent(trx, 'checkout.session_expired', row, this.config);
      return rows.length;
    });
  }

  /** Frees amounts past their late window (no transfer can match them); with a price, only its suffixes. */
  async releaseLapsedReservations(priceMicro?: bigint): Promise<number> {
    const ofPrice =
      priceMicro === undefined
        ? sql``
        : sql`and exact_amount_micro between ${priceMicro + 1n} and ${priceMicro + BigInt(this.capacity.suffixes)}`;
    const result = await sql`
      update sessions set amount_reserved = false
      where session_id in (
        select session_id from sessions where amount_reserved and late_until <= ${this.config.now()} ${ofPrice}
        order by late_until limit ${SWEEP_BATCH} for update skip locked
      )`.execute(this.ctx.db);
    return Number(result.numAffectedRows ?? 0n);
  }
}

function isUniqueViolation(error: unknown, constraint: string): boolean {
  const e = error as { code?: string; constraint?: string };
  return e?.code === '23505' && e.constraint === constraint;
}
