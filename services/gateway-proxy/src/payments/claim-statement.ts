import { createHash } from 'node:crypto';
import { preparedStatement } from '@paygate/runtime';
import { type RawBuilder, sql, type Transaction } from 'kysely';
import type { GatewayDatabase } from '../db';
import { ClaimInvariantError } from '../errors';
import type { PaymentClaim, PaymentSettings, Purchase } from './types';

/** A claim row (this gateway's record of a purchase and its service) and the one statement writing a batch. */

const DAY_MS = 24 * 60 * 60 * 1000;

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
 * A record written with a claim (insertRecorded), set-wise so a batch shares one statement: `values` is one row of
 * the `records` CTE; `statement` reads `records` and `claims` and returns the `batch_index` of each record written.
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
export const NO_RECORD: RecordStatement = {
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
  retryCause: PaymentClaim['retry_cause'];
  now: Date;
}

/** A claim to write: the transfer, what it buys, how its row starts and what is recorded beside it. */
export interface ClaimToWrite {
  transfer: ProvenTransfer;
  purchase: Purchase;
  options: ClaimOptions;
  record: RecordStatement;
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
  'retry_cause',
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

/** The batch in one statement, claims as arrays: prepared once per connection and record kind. */
export async function writeClaims(
  trx: Transaction<GatewayDatabase>,
  settings: PaymentSettings,
  batch: ClaimToWrite[],
): Promise<RecordedClaim[]> {
  const claims = batch.map((item) => claimValues(settings, item.transfer, item.purchase, item.options));
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
            ${column((c) => c.retryCause)}::text[], ${column((c) => c.now)}::timestamptz[])
          as r(batch_index, id, tx_hash, log_index, payer, token, amount_micro, seller_id, skill_id, skill_name,
            endpoint_id, resource, kind, claimed_via, state, access_expires_at, retry_until, retry_cause, now)
      ),
      claimed as (
        insert into payment_claims
            (id, network, chain_id, tx_hash, log_index, payer, token, amount_micro, seller_id, skill_id,
             skill_name, endpoint_id, resource, kind, claimed_via, state, access_expires_at, retry_until,
             retry_cause, attempts, created_at, updated_at)
          select id, ${settings.network}, ${settings.chainId}::integer, tx_hash, log_index, payer, token,
              amount_micro, seller_id, skill_id, skill_name, endpoint_id, resource, kind, claimed_via, state,
              access_expires_at, retry_until, retry_cause, 1, now, now
            from req order by batch_index
          -- No conflict target: the id (gatewayPaymentId of network:tx_hash) is a second unique key, and an
          -- insert racing another of the same transfer can meet it first, which with a target on (network, tx_hash)
          -- alone is a unique violation (a 500) instead of the lost race it is.
          on conflict do nothing
          returning ${RETURNED_CLAIM_COLUMNS}
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
    if (!row) throw new ClaimInvariantError('claim statement returned no row for a claim');
    const { batch_index: _index, recorded_elsewhere: recorded, ...claim } = row;
    return { claim: claim.id ? (claim as PaymentClaim) : undefined, recorded: Number(recorded) > 0 };
  });
}

/**
 * The payment id of a transfer claimed here: one per `network:txHash` (the claim row's unique key), so every
 * replica and every retry asks the ledger with the same id and the row carries the id the ledger booked.
 */
export function gatewayPaymentId(network: string, txHash: string): string {
  return `pay_${createHash('sha256').update(`${network}:${txHash.toLowerCase()}`).digest('hex').slice(0, 40)}`;
}

/** One claim row's values. */
function claimValues(
  settings: PaymentSettings,
  transfer: ProvenTransfer,
  purchase: Purchase,
  options: ClaimOptions,
): ClaimValues {
  const now = settings.now();
  return {
    id: gatewayPaymentId(settings.network, transfer.txHash),
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
    state: initialState(purchase, options),
    accessExpiresAt: accessExpiresAt(purchase, now),
    retryUntil: options.retryUntil ?? null,
    // A claim made retryable was settled after its caller stopped waiting: nothing was forwarded yet.
    retryCause: initialState(purchase, options) === 'retryable' ? 'not_attempted' : null,
    now,
  };
}

function initialState(purchase: Purchase, options: ClaimOptions): PaymentClaim['state'] {
  return (
    options.state ??
    // A proxied pay-per-call stays in flight until the seller answered; everything else is served now.
    (purchase.claimedVia === 'proxy' && purchase.kind !== 'subscription' ? 'in_flight' : 'served')
  );
}

function accessExpiresAt(purchase: Purchase, now: Date): Date | null {
  return purchase.kind === 'subscription'
    ? new Date(now.getTime() + (purchase.durationDays ?? 30) * DAY_MS)
    : null;
}
