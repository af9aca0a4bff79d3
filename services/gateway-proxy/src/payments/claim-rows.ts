import { createEvent, newEventId, validateEvent } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import { preparedStatement, type ServiceContext, WriteBatcher } from '@paygate/runtime';
import { currentTraceCarrier } from '@paygate/telemetry';
import { type RawBuilder, sql, type Transaction } from 'kysely';
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
 * A record written with a claim (PaymentClaimRows.insertRecorded), set-wise so that the claims of a batch share one
 * statement whatever their number: this claim's `values` (one row of the `records` CTE, typed by `columns`, beside
 * the claim's `batch_index`) and the data-modifying `statement` written once for all the records of a batch. It
 * reads `records` and `claims` (`batch_index`, and `id`: the claim row's, null when the transfer was claimed
 * before) and returns the `batch_index` of each record it wrote. Claims share a statement only with records of
 * the same `kind`.
 */
export interface RecordStatement {
  kind: string;
  columns: ReadonlyArray<readonly [name: string, sqlType: string]>;
  values: readonly unknown[];
  statement(records: RawBuilder<unknown>, claims: RawBuilder<unknown>): RawBuilder<unknown>;
}

/** A claim written with its record: no claim when the transfer was claimed before. */
export interface RecordedClaim {
  claim: PaymentClaim | undefined;
  recorded: boolean;
}

/** No record beside the claim (the tx-hash proof, /api/verify): such claims share statements with each other. */
const NO_RECORD: RecordStatement = {
  kind: 'none',
  columns: [],
  values: [],
  statement: () => sql`select null::integer as batch_index where false`,
};

/** A claim row's values as the batched statement takes them (arrays, one element per claim). */
interface ClaimValues {
  id: string;
  txHash: string;
  logIndex: number;
  payer: string;
  token: string;
  amountMicro: string;
  sellerId: string;
  skillId: string | null;
  skillName: string | null;
  endpointId: string | null;
  resource: string;
  kind: string;
  claimedVia: string;
  state: PaymentClaim['state'];
  accessExpiresAt: Date | null;
  retryUntil: Date | null;
  now: Date;
  eventId: string;
  envelope: string;
}

interface QueuedClaim {
  transfer: ProvenTransfer;
  purchase: Purchase;
  options: ClaimOptions;
  record: RecordStatement;
  /** The ledger's answer to this claim: undefined when the transfer is this payment's. */
  ledgerAnswer: Promise<PaymentFailure | undefined>;
  resolve(result: RecordedClaim): void;
  reject(error: unknown): void;
}

/** Some claims of a batch were refused by the ledger: the batch's transaction is rolled back. */
class RefusedInBatch extends Error {
  constructor(readonly answers: Array<PaymentFailure | undefined>) {
    super('the ledger refused claims of this batch');
  }
}

/** The claim row's columns, named in the claim statement's result: prepared, its result must not change with a migration. */
const CLAIM_COLUMNS = [
  'id',
  'network',
  'chain_id',
  'tx_hash',
  'log_index',
  'payer',
  'token',
  'amount_micro',
  'seller_id',
  'skill_id',
  'skill_name',
  'endpoint_id',
  'resource',
  'kind',
  'claimed_via',
  'state',
  'access_expires_at',
  'retry_until',
  'attempts',
  'created_at',
  'updated_at',
] as const satisfies ReadonlyArray<keyof PaymentClaim>;
/** Fails to compile when PaymentClaim gains a field CLAIM_COLUMNS does not name. */
const everyClaimColumnNamed: Exclude<keyof PaymentClaim, (typeof CLAIM_COLUMNS)[number]> extends never
  ? true
  : never = true;
void everyClaimColumnNamed;
const RETURNED_CLAIM_COLUMNS = sql.raw(CLAIM_COLUMNS.join(', '));
const SELECTED_CLAIM_COLUMNS = sql.raw(CLAIM_COLUMNS.map((column) => `c.${column}`).join(', '));

/** Claim statements written at once (the gateway's pool has DB_POOL_SIZE connections; 4 in tests). */
const MAX_CLAIM_WRITES = 2;
/** How long after an x402 claim its payment.confirmed is published (a burst's answers first; the poll is 250 ms). */
const PUBLISH_AFTER_MS = 100;
/** Claims in one statement at most. */
const MAX_CLAIMS_PER_STATEMENT = 25;

/** This gateway's payment_claims rows: claimed (with the ledger's claim and payment.confirmed), read, updated. */
export class PaymentClaimRows {
  /**
   * One claim per transfer in a statement (two of one transfer would update one row twice), records of one kind;
   * the claims that came while MAX_CLAIM_WRITES statements were being written go in the next one.
   */
  private readonly batcher = new WriteBatcher<QueuedClaim>({
    maxWrites: MAX_CLAIM_WRITES,
    maxPerWrite: MAX_CLAIMS_PER_STATEMENT,
    fits: (batch, item) =>
      !batch.some(
        (other) =>
          other.transfer.txHash.toLowerCase() === item.transfer.txHash.toLowerCase() ||
          other.record.kind !== item.record.kind,
      ),
    write: (batch) => this.writeBatch(batch),
  });

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
    return (await this.insertRecorded(transfer, purchase, options, NO_RECORD)).claim;
  }

  /**
   * Claims a transfer like `insert`, and records it elsewhere in the same statement: `record` (RecordStatement)
   * names one more data-modifying statement that reads the claim rows (none: the transfer was claimed before) and
   * returns a row for each record it wrote. x402 records the included transfer on its authorization this way, so a
   * settled payment costs one statement here, written while the ledger answers.
   *
   * The ledger is asked and the statement written at the same time, as `insert` does: the statement runs in a
   * transaction that commits only once the ledger answered that the transfer is this payment's (rolled back when
   * it refused: nothing is written), so the answer waits for the slower of the two rather than for both in turn.
   * A crash before the commit leaves at most the ledger's claim under this gateway's reference, which answers the
   * same claim again ok (the recovery pass claims it). Claims that come while others are being written go out
   * together, as one statement (one round trip, one commit); each claim's outcome is its own: when the ledger
   * refused some of a batch, the batch is rolled back and written again without them. Throws LedgerClaimRefused
   * like `insert`.
   */
  async insertRecorded(
    transfer: ProvenTransfer,
    purchase: Purchase,
    options: ClaimOptions,
    record: RecordStatement,
  ): Promise<RecordedClaim> {
    const ledgerAnswer = this.ledger.claim(this.ledgerClaimOf(transfer, purchase));
    // Awaited in the batch's transaction; one that fails to begin must not leave the answer's failure unhandled.
    ledgerAnswer.catch(() => undefined);
    const recorded = await new Promise<RecordedClaim>((resolve, reject) =>
      this.batcher.add({ transfer, purchase, options, record, ledgerAnswer, resolve, reject }),
    );
    // payment.confirmed goes out once the burst's answers did (the ledger books it then), not between them.
    if (recorded.claim) this.ctx.relay.kickSoon(PUBLISH_AFTER_MS);
    return recorded;
  }

  /**
   * One statement for the batch, committed once the ledger agreed to every claim in it. Claims the ledger refused
   * are refused (LedgerClaimRefused) and the rest written again without them; when the statement fails, each
   * claim alone (one claim's failure is only its own).
   */
  private async writeBatch(batch: QueuedClaim[]): Promise<void> {
    try {
      const results = await this.ctx.db.transaction().execute(async (trx) => {
        const written = await this.writeClaims(trx, batch);
        const answers = await Promise.all(batch.map((item) => item.ledgerAnswer));
        if (answers.some((answer) => answer !== undefined)) throw new RefusedInBatch(answers);
        return written;
      });
      for (const [i, item] of batch.entries()) item.resolve(results[i]!);
    } catch (error) {
      if (error instanceof RefusedInBatch) {
        const agreed = batch.filter((item, i) => {
          const answer = error.answers[i];
          if (answer) item.reject(new LedgerClaimRefused(answer));
          return !answer;
        });
        if (agreed.length > 0) await this.writeBatch(agreed);
        return;
      }
      if (batch.length === 1) {
        batch[0]!.reject(error);
        return;
      }
      for (const item of batch) await this.writeBatch([item]);
    }
  }

  /**
   * The batch's claim rows, their payment.confirmed and their records in one statement, the claims as arrays (the
   * statement is the same whatever their number: prepared once per connection and record kind, it is planned like
   * one claim's).
   */
  private async writeClaims(trx: Transaction<any>, batch: QueuedClaim[]): Promise<RecordedClaim[]> {
    const claims = batch.map((item) => this.claimValues(item.transfer, item.purchase, item.options));
    const column = <T>(pick: (claim: ClaimValues) => T) => claims.map(pick);
    const indexes = batch.map((_item, i) => i);
    const record = batch[0]!.record;
    const recordColumns = [
      sql`${indexes}::integer[]`,
      ...record.columns.map(
        ([, type], c) => sql`${batch.map((item) => item.record.values[c] ?? null)}::${sql.raw(type)}[]`,
      ),
    ];
    const recordNames = sql.raw(['batch_index', ...record.columns.map(([name]) => name)].join(', '));
    const rows = (
      await sql<PaymentClaim & { batch_index: number; recorded_elsewhere: number }>`${preparedStatement(
        `gateway_claims_${record.kind}`,
      )}
        with req as (
          select * from unnest(
              ${indexes}::integer[], ${column((c) => c.id)}::text[], ${column((c) => c.txHash)}::text[],
              ${column((c) => c.logIndex)}::integer[], ${column((c) => c.payer)}::text[],
              ${column((c) => c.token)}::text[], ${column((c) => c.amountMicro)}::bigint[],
              ${column((c) => c.sellerId)}::text[], ${column((c) => c.skillId)}::text[],
              ${column((c) => c.skillName)}::text[], ${column((c) => c.endpointId)}::text[],
              ${column((c) => c.resource)}::text[], ${column((c) => c.kind)}::text[],
              ${column((c) => c.claimedVia)}::text[], ${column((c) => c.state)}::text[],
              ${column((c) => c.accessExpiresAt)}::timestamptz[], ${column((c) => c.retryUntil)}::timestamptz[],
              ${column((c) => c.now)}::timestamptz[], ${column((c) => c.eventId)}::text[],
              ${column((c) => c.envelope)}::jsonb[])
            as r(batch_index, id, tx_hash, log_index, payer, token, amount_micro, seller_id, skill_id, skill_name,
              endpoint_id, resource, kind, claimed_via, state, access_expires_at, retry_until, now, event_id, envelope)
        ),
        claimed as (
          insert into payment_claims
              (id, network, chain_id, tx_hash, log_index, payer, token, amount_micro, seller_id, skill_id,
               skill_name, endpoint_id, resource, kind, claimed_via, state, access_expires_at, retry_until, attempts,
               created_at, updated_at)
            select id, ${this.settings.network}, ${this.settings.chainId}::integer, tx_hash, log_index, payer, token,
                amount_micro, seller_id, skill_id, skill_name, endpoint_id, resource, kind, claimed_via, state,
                access_expires_at, retry_until, 1, now, now
              from req order by batch_index
            on conflict (network, tx_hash) do nothing
            returning ${RETURNED_CLAIM_COLUMNS}
        ),
        published as (
          insert into outbox (id, subject, envelope, published_at)
            select r.event_id, 'payment.confirmed', r.envelope, null from req r join claimed c on c.id = r.id
        ),
        claims as (select r.batch_index, c.id from req r left join claimed c on c.id = r.id),
        records as (
          select * from unnest(${sql.join(recordColumns)}) as x(${recordNames})
        ),
        recorded as (${record.statement(sql.raw('records'), sql.raw('claims'))})
        select r.batch_index, ${SELECTED_CLAIM_COLUMNS},
            (select count(*) from recorded w where w.batch_index = r.batch_index)::int as recorded_elsewhere
          from req r left join claimed c on c.id = r.id`.execute(trx)
    ).rows;
    return batch.map((_item, i) => {
      const row = rows.find((r) => Number(r.batch_index) === i);
      if (!row) throw new Error('claim statement returned no row for a claim');
      const { batch_index: _index, recorded_elsewhere: recorded, ...claim } = row;
      return { claim: claim.id ? (claim as PaymentClaim) : undefined, recorded: Number(recorded) > 0 };
    });
  }

  /** One claim row's values and its payment.confirmed (the event, validated). */
  private claimValues(transfer: ProvenTransfer, purchase: Purchase, options: ClaimOptions): ClaimValues {
    const now = this.settings.now();
    const id = newEventId();
    const confirmed = this.paymentConfirmed(id, transfer, purchase, now);
    return {
      id,
      txHash: transfer.txHash,
      logIndex: transfer.logIndex,
      payer: transfer.payer,
      token: transfer.token,
      amountMicro: transfer.amountMicro.toString(),
      sellerId: purchase.sellerId,
      skillId: purchase.skillId,
      skillName: purchase.skillName,
      endpointId: purchase.endpointId,
      resource: purchase.resource,
      kind: purchase.kind,
      claimedVia: purchase.claimedVia,
      state: this.initialState(purchase, options),
      accessExpiresAt: this.accessExpiresAt(purchase, now),
      retryUntil: options.retryUntil ?? null,
      now,
      eventId: confirmed.id,
      envelope: JSON.stringify(confirmed),
    };
  }

  private initialState(purchase: Purchase, options: ClaimOptions): PaymentClaim['state'] {
    return (
      options.state ??
      // A proxied pay-per-call stays in flight until the seller answered; everything else is served now.
      (purchase.claimedVia === 'proxy' && purchase.kind !== 'subscription' ? 'in_flight' : 'served')
    );
  }

  private accessExpiresAt(purchase: Purchase, now: Date): Date | null {
    return purchase.kind === 'subscription'
      ? new Date(now.getTime() + (purchase.durationDays ?? 30) * DAY_MS)
      : null;
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
