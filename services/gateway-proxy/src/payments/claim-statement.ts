import { createHash } from 'node:crypto';
import { preparedStatement } from '@paygate/runtime';
import { type RawBuilder, sql, type Transaction } from 'kysely';
import type { GatewayDatabase } from '../db';
import { ClaimInvariantError } from '../errors';
import type { PaymentClaim, PaymentSettings, Purchase } from './types';

const DAY_MS = 24 * 60 * 60 * 1000;

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

/** A record written with a claim, set-wise: `values` is a row of `records`; `statement` returns each batch_index written. */
export interface RecordStatement {
  kind: string;
  columns: ReadonlyArray<readonly [name: string, sqlType: string]>;
  values: readonly unknown[];
  statement(records: RawBuilder<unknown>, claims: RawBuilder<unknown>): RawBuilder<unknown>;
}

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

export interface ClaimToWrite {
  transfer: ProvenTransfer;
  purchase: Purchase;
  options: ClaimOptions;
  record: RecordStatement;
}

/** Named in the prepared statement's result, which must not change with a migration. */
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
  const now = settings.now();
  const states = batch.map(({ purchase, options }) => initialState(purchase, options));
  const column = <T>(pick: (claim: ClaimToWrite, i: number) => T) => batch.map(pick);
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
            ${indexes}::integer[], ${column((c) => gatewayPaymentId(settings.network, c.transfer.txHash))}::text[],
            ${column((c) => c.transfer.txHash)}::text[], ${column((c) => c.transfer.logIndex)}::integer[],
            ${column((c) => c.transfer.payer)}::text[], ${column((c) => c.transfer.token)}::text[],
            ${column((c) => c.transfer.amountMicro.toString())}::bigint[],
            ${column((c) => c.purchase.sellerId)}::text[], ${column((c) => c.purchase.skillId)}::text[],
            ${column((c) => c.purchase.skillName)}::text[], ${column((c) => c.purchase.endpointId)}::text[],
            ${column((c) => c.purchase.resource)}::text[], ${column((c) => c.purchase.kind)}::text[],
            ${column((c) => c.purchase.claimedVia)}::text[], ${states}::text[],
            ${column((c) => accessExpiresAt(c.purchase, now))}::timestamptz[],
            ${column((c) => c.options.retryUntil ?? null)}::timestamptz[],
            ${column((_c, i) => (states[i] === 'retryable' ? 'not_attempted' : null))}::text[],
            ${column(() => now)}::timestamptz[])
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
          -- No conflict target: a racing insert may meet the id's unique key first, which is the same lost race.
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

/** One payment id per `network:txHash`: every replica and retry asks the ledger with the same id. */
export function gatewayPaymentId(network: string, txHash: string): string {
  return `pay_${createHash('sha256').update(`${network}:${txHash.toLowerCase()}`).digest('hex').slice(0, 40)}`;
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
