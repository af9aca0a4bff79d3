import { createEvent, newEventId, validateEvent } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import { currentTraceCarrier } from '@paygate/telemetry';
import { type RawBuilder, sql } from 'kysely';
import type { LedgerClaims, TransferToClaim } from './claims';
import type { PaymentFailure } from './failures';
import type { PaymentClaim, PaymentSettings, Purchase } from './types';

const DAY_MS = 24 * 60 * 60 * 1000;

/** The ledger did not let this purchase spend the transfer: `failure` says why (already used elsewhere, or 503). */
export class LedgerClaimRefused extends Error {
  constructor(readonly failure: PaymentFailure) {
    super(failure.message);
    this.name = 'LedgerClaimRefused';
  }
}

/** An on-chain transfer proven to pay a purchase, as the claim row records it. */
export interface ProvenTransfer {
  txHash: string;
  logIndex: number;
  payer: string;
  token: string;
  amountMicro: bigint;
}

/** How a claim row starts: its state (default: served, or in flight for a proxied pay-per-call) and retry window. */
export interface ClaimOptions {
  state?: PaymentClaim['state'];
  retryUntil?: Date | null;
}

/**
 * A record written with a claim (PaymentClaimRows.insertRecorded): a data-modifying statement that reads the claim
 * row from the CTE it is given and returns a row when it recorded something.
 */
export type RecordStatement = (claimed: RawBuilder<unknown>) => RawBuilder<unknown>;

/** A claim written with its record: no claim when the transfer was claimed before. */
export interface RecordedClaim {
  claim: PaymentClaim | undefined;
  recorded: boolean;
}

interface QueuedClaim {
  transfer: ProvenTransfer;
  purchase: Purchase;
  options: ClaimOptions;
  record: RecordStatement;
  resolve(result: RecordedClaim): void;
  reject(error: unknown): void;
}

/** Claim statements written at once (the gateway's pool has DB_POOL_SIZE connections; 4 in tests). */
const MAX_CLAIM_WRITES = 2;
/** Claims in one statement at most. */
const MAX_CLAIMS_PER_STATEMENT = 25;

/** This gateway's payment_claims rows: claimed (with the ledger's claim and payment.confirmed), read, updated. */
export class PaymentClaimRows {
  /** Claims whose ledger answer came while MAX_CLAIM_WRITES statements were being written: the next statement's. */
  private readonly queued: QueuedClaim[] = [];
  private writing = 0;
  private scheduled = false;

  constructor(
    private readonly ctx: ServiceContext,
    private readonly settings: PaymentSettings,
    private readonly ledger: LedgerClaims,
  ) {}

  /**
   * Claims an on-chain transfer for a purchase: one row per `network:txHash` (a unique constraint), inserted in the
   * same transaction that enqueues payment.confirmed. Undefined when the transfer was already claimed.
   *
   * The ledger claims the transfer (`ledger.claim_transfer`) while the row is written, and the row commits only once
   * the ledger agreed: one transfer buys one thing whatever path claims it (checkout sessions, /api/verify,
   * operator refunds). Every replica asks with the same reference (`<network>:<txHash>`), so a concurrent
   * presentation here is answered ok too and the local row decides.
   * Throws LedgerClaimRefused when the ledger refuses (another path spent it) or does not answer in time.
   */
  async insert(
    transfer: ProvenTransfer,
    purchase: Purchase,
    options: ClaimOptions = {},
  ): Promise<PaymentClaim | undefined> {
    // The ledger's claim and this gateway's row go out together: the row is written in a transaction that commits
    // only once the ledger answered that the transfer is this payment's (rolled back when it refused), so a fresh
    // payment waits for the slower of the two rather than for both in turn.
    const ledgerAnswer = this.ledger.claim(this.ledgerClaimOf(transfer, purchase));
    // Awaited in the transaction; one that fails to begin must not leave the answer's failure unhandled.
    ledgerAnswer.catch(() => undefined);
    const statement = this.claimStatement(transfer, purchase, options);
    return this.ctx.inTransaction(async (trx) => {
      const row = (await statement.execute(trx)).rows[0];
      const refusedByLedger = await ledgerAnswer;
      if (refusedByLedger) throw new LedgerClaimRefused(refusedByLedger);
      return row;
    });
  }

  /**
   * Claims a transfer like `insert`, and records it elsewhere in the same statement: `record` names one more
   * data-modifying statement (a CTE) that may read the claim row from the CTE it is given (no row: the transfer
   * was claimed before) and returns a row when it recorded something. x402 records the included transfer on its
   * authorization this way, so a settled payment costs one statement here after the ledger's answer.
   *
   * The ledger is asked first and the statement runs only once it answered that the transfer is this payment's
   * (nothing is written when it refused): no transaction held open across the RPC. A crash between the two leaves
   * the ledger's claim under this gateway's reference, which answers the same claim again ok (the recovery pass
   * claims it). Claims that are ready while others are being written go out together, as one statement (one
   * round trip, one commit); each claim's outcome is its own. Throws LedgerClaimRefused like `insert`.
   */
  async insertRecorded(
    transfer: ProvenTransfer,
    purchase: Purchase,
    options: ClaimOptions,
    record: RecordStatement,
  ): Promise<RecordedClaim> {
    const refusedByLedger = await this.ledger.claim(this.ledgerClaimOf(transfer, purchase));
    if (refusedByLedger) throw new LedgerClaimRefused(refusedByLedger);
    const recorded = await new Promise<RecordedClaim>((resolve, reject) => {
      this.queued.push({ transfer, purchase, options, record, resolve, reject });
      // After the I/O at hand: the ledger's answers that arrived with this one go in the same statement.
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.writeQueued();
      });
    });
    if (recorded.claim) this.ctx.relay.kick();
    return recorded;
  }

  /** Starts a statement for the queued claims when fewer than MAX_CLAIM_WRITES are being written. */
  private writeQueued(): void {
    if (this.writing >= MAX_CLAIM_WRITES || this.queued.length === 0) return;
    // One claim per transaction in a statement (two of one transfer would update one row twice): the rest waits.
    const batch: QueuedClaim[] = [];
    const rest: QueuedClaim[] = [];
    const hashes = new Set<string>();
    for (const item of this.queued.splice(0)) {
      const hash = item.transfer.txHash.toLowerCase();
      if (batch.length >= MAX_CLAIMS_PER_STATEMENT || hashes.has(hash)) rest.push(item);
      else {
        hashes.add(hash);
        batch.push(item);
      }
    }
    this.queued.push(...rest);
    this.writing += 1;
    void this.writeBatch(batch).finally(() => {
      this.writing -= 1;
      this.writeQueued();
    });
  }

  /** One statement for the batch; when it fails, each claim alone (one claim's failure is only its own). */
  private async writeBatch(batch: QueuedClaim[]): Promise<void> {
    try {
      const results = await this.writeClaims(batch);
      for (const [i, item] of batch.entries()) item.resolve(results[i]!);
    } catch (error) {
      if (batch.length === 1) {
        batch[0]!.reject(error);
        return;
      }
      for (const item of batch) {
        await this.writeClaims([item]).then(
          ([result]) => item.resolve(result!),
          (alone: unknown) => item.reject(alone),
        );
      }
    }
  }

  private async writeClaims(batch: QueuedClaim[]): Promise<RecordedClaim[]> {
    const parts = batch.map((item, i) => {
      const claimed = sql.raw(`claimed_${i}`);
      const recorded = sql.raw(`recorded_${i}`);
      return {
        ctes: sql`${this.claimCtes(item.transfer, item.purchase, item.options, claimed, sql.raw(`published_${i}`))},
          ${recorded} as (${item.record(claimed)})`,
        answer: sql`select ${sql.lit(i)}::int as batch_index, c.*,
            (select count(*) from ${recorded})::int as recorded_elsewhere
          from (select 1) as one left join ${claimed} as c on true`,
      };
    });
    const rows = (
      await sql<PaymentClaim & { batch_index: number; recorded_elsewhere: number }>`
        with ${sql.join(
          parts.map((part) => part.ctes),
          sql`,
          `,
        )}
        ${sql.join(
          parts.map((part) => part.answer),
          sql`
        union all
        `,
        )}`.execute(this.ctx.db)
    ).rows;
    return batch.map((_item, i) => {
      const row = rows.find((r) => Number(r.batch_index) === i);
      if (!row) throw new Error('claim statement returned no row for a claim');
      const { batch_index: _index, recorded_elsewhere: recorded, ...claim } = row;
      return { claim: claim.id ? (claim as PaymentClaim) : undefined, recorded: Number(recorded) > 0 };
    });
  }

  private ledgerClaimOf(transfer: ProvenTransfer, purchase: Purchase): TransferToClaim {
    return {
      chainId: this.settings.chainId,
      txHash: transfer.txHash.toLowerCase(),
      logIndex: transfer.logIndex,
      claimedVia: purchase.claimedVia === 'verify' ? 'verify' : 'x402',
      reference: `${this.settings.network}:${transfer.txHash.toLowerCase()}`,
      payer: transfer.payer,
      amountMicro: transfer.amountMicro,
    };
  }

  /** The claim row, and payment.confirmed in the outbox only when the row was inserted: one statement. */
  private claimStatement(
    transfer: ProvenTransfer,
    purchase: Purchase,
    options: ClaimOptions,
  ): RawBuilder<PaymentClaim> {
    return sql<PaymentClaim>`
      with ${this.claimCtes(transfer, purchase, options, sql.raw('claimed'), sql.raw('published'))}
      select * from claimed`;
  }

  /** The two CTEs of a claim: the row (`claimed`, returning it when inserted) and its payment.confirmed. */
  private claimCtes(
    transfer: ProvenTransfer,
    purchase: Purchase,
    options: ClaimOptions,
    claimed: RawBuilder<unknown>,
    published: RawBuilder<unknown>,
  ): RawBuilder<unknown> {
    const now = this.settings.now();
    const claimId = newEventId();
    const state =
      options.state ??
      // A proxied pay-per-call stays in flight until the seller answered; everything else is served now.
      (purchase.claimedVia === 'proxy' && purchase.kind !== 'subscription' ? 'in_flight' : 'served');
    const accessExpiresAt =
      purchase.kind === 'subscription'
        ? new Date(now.getTime() + (purchase.durationDays ?? 30) * DAY_MS)
        : null;
    const confirmed = this.paymentConfirmed(claimId, transfer, purchase, now);
    return sql`
      ${claimed} as (
        insert into payment_claims
            (id, network, chain_id, tx_hash, log_index, payer, token, amount_micro, seller_id, skill_id,
             skill_name, endpoint_id, resource, kind, claimed_via, state, access_expires_at, retry_until, attempts,
             created_at, updated_at)
          values (${claimId}, ${this.settings.network}, ${this.settings.chainId}, ${transfer.txHash},
            ${transfer.logIndex}, ${transfer.payer}, ${transfer.token}, ${transfer.amountMicro},
            ${purchase.sellerId}, ${purchase.skillId}, ${purchase.skillName}, ${purchase.endpointId},
            ${purchase.resource}, ${purchase.kind}, ${purchase.claimedVia}, ${state}, ${accessExpiresAt},
            ${options.retryUntil ?? null}, 1, ${now}, ${now})
          on conflict (network, tx_hash) do nothing
          returning *
      ),
      ${published} as (
        insert into outbox (id, subject, envelope, published_at)
          select ${confirmed.id}::text, ${confirmed.type}::text, ${JSON.stringify(confirmed)}::jsonb, null
          from ${claimed}
      )`;
  }

  /** The claim made on a transaction, if any. */
  async find(network: string, txHash: string): Promise<PaymentClaim | undefined> {
    return (await this.ctx.db
      .selectFrom('payment_claims')
      .selectAll()
      .where('network', '=', network)
      .where('tx_hash', '=', txHash)
      .executeTakeFirst()) as PaymentClaim | undefined;
  }

  /**
   * A pay-per-call whose seller call failed, in flight again for its retry: only within its retry window, when it
   * is retryable or its last attempt went stale. Undefined when it may not be retried.
   */
  async reopenForRetry(claim: PaymentClaim): Promise<PaymentClaim | undefined> {
    const now = this.settings.now();
    const staleBefore = new Date(now.getTime() - this.settings.upstreamTimeoutMs - 5000);
    return (await this.ctx.db
      .updateTable('payment_claims')
      .set((eb: any) => ({ state: 'in_flight', attempts: eb('attempts', '+', 1), updated_at: now }))
      .where('id', '=', claim.id)
      .where('retry_until', '>', now)
      .where('attempts', '<', 50)
      .where((eb: any) =>
        eb.or([
          eb('state', '=', 'retryable'),
          eb.and([eb('state', '=', 'in_flight'), eb('updated_at', '<', staleBefore)]),
        ]),
      )
      .returningAll()
      .executeTakeFirst()) as PaymentClaim | undefined;
  }

  /** The seller answered: the pay-per-call payment is spent. */
  markServed(claim: PaymentClaim): undefined | Promise<void> {
    // A subscription stays usable: nothing to write (and no promise on its repeated call).
    if (claim.kind === 'subscription') return undefined;
    return this.ctx.db
      .updateTable('payment_claims')
      .set({ state: 'served', updated_at: this.settings.now() })
      .where('id', '=', claim.id)
      .execute()
      .then(() => undefined);
  }

  private paymentConfirmed(claimId: string, transfer: ProvenTransfer, purchase: Purchase, now: Date) {
    const confirmed = createEvent(
      'payment.confirmed',
      'gateway-proxy',
      {
        paymentId: claimId,
        source: 'x402',
        sellerId: purchase.sellerId,
        skillId: purchase.skillId,
        skillName: purchase.skillName,
        endpointId: purchase.endpointId,
        sessionId: null,
        payer: transfer.payer,
        amount: formatUsdc(transfer.amountMicro),
        network: this.settings.network as 'base' | 'base-sepolia' | 'local',
        chainId: this.settings.chainId,
        token: transfer.token,
        txHash: transfer.txHash,
        logIndex: transfer.logIndex,
        holdPeriodHours: purchase.holdPeriodHours,
        confirmedAt: now.toISOString(),
      },
      { trace: currentTraceCarrier() },
    );
    validateEvent(confirmed);
    return confirmed;
  }
}
