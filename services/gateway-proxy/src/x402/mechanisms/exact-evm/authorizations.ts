import type { TransferAuthorization } from '@paygate/contracts';
import { type Kysely, type Selectable, sql } from 'kysely';
import type { GatewayDatabase, X402AuthorizationsTable } from '../../../db';
import type { RecordStatement } from '../../../payments/claim-statement';
import type { PaymentClaim, Purchase } from '../../../payments/service';
import type { DecodedX402Payment } from '../../protocol';

type StoredAuthorization = Selectable<X402AuthorizationsTable>;

/** One authorization, whoever presents it: `(chain, token, payer, nonce)`. */
export type AuthorizationKey = Pick<StoredAuthorization, 'chain_id' | 'token' | 'payer' | 'auth_nonce'>;

/** An authorization's row, its purchase as claim() stored it (`priceMicro` as a decimal string). */
export type AuthorizationRow = Omit<StoredAuthorization, 'purchase'> & {
  purchase: Purchase & { priceMicro: string };
};

/** Claimed by a caller at `claimedAt`; a takeover renews `updated_at`, so a stalled caller no longer holds it. */
export interface ClaimedAuthorization {
  key: AuthorizationKey;
  claimedAt: Date;
}

const SETTLEMENT_COLUMNS = [
  ['chain_id', 'integer'],
  ['token', 'text'],
  ['payer', 'text'],
  ['auth_nonce', 'text'],
  ['tx_hash', 'text'],
  ['log_index', 'integer'],
  ['updated_at', 'timestamptz'],
] as const;

/** The transfer an authorization's submission was included in. */
interface Settlement {
  txHash: string;
  logIndex: number | null;
}

/** `x402_authorizations`: claimed for one purchase before anything is submitted, seen by every replica and copy. */
export class X402Authorizations {
  constructor(
    private readonly db: Kysely<GatewayDatabase>,
    private readonly chain: { chainId: number; usdcAddress: string },
    private readonly now: () => Date,
  ) {}

  keyOf(authorization: Pick<TransferAuthorization, 'from' | 'nonce'>): AuthorizationKey {
    return {
      chain_id: this.chain.chainId,
      token: this.chain.usdcAddress.toLowerCase(),
      payer: authorization.from.toLowerCase(),
      auth_nonce: authorization.nonce.toLowerCase(),
    };
  }

  /** Undefined when it was presented before. */
  async claim(
    payment: DecodedX402Payment,
    purchase: Purchase,
    version: 1 | 2,
  ): Promise<ClaimedAuthorization | undefined> {
    const a = payment.authorization;
    const now = this.now();
    const key = this.keyOf(a);
    const inserted = await this.db
      .insertInto('x402_authorizations')
      .values({
        ...key,
        signature: payment.signature.toLowerCase(),
        to_address: a.to.toLowerCase(),
        value_micro: BigInt(a.value),
        valid_after: BigInt(a.validAfter),
        valid_before: BigInt(a.validBefore),
        resource: purchase.resource,
        seller_id: purchase.sellerId,
        purchase: JSON.stringify({ ...purchase, priceMicro: purchase.priceMicro.toString() }),
        x402_version: version,
        state: 'submitting',
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc: any) => oc.columns(['chain_id', 'token', 'payer', 'auth_nonce']).doNothing())
      .returning(['auth_nonce'])
      .executeTakeFirst();
    return inserted === undefined ? undefined : { key, claimedAt: now };
  }

  find(key: AuthorizationKey): Promise<AuthorizationRow | undefined> {
    return this.db
      .selectFrom('x402_authorizations')
      .selectAll()
      .where((eb: any) => eb.and(key))
      .executeTakeFirst() as Promise<AuthorizationRow | undefined>;
  }

  /** Nothing was submitted: the authorization may come again. Only while the caller still holds its claim. */
  async forget(claimed: ClaimedAuthorization): Promise<void> {
    const forgotten = await this.db
      .deleteFrom('x402_authorizations')
      .where((eb: any) => eb.and(claimed.key))
      .where('state', '=', 'submitting')
      .where('updated_at', '=', claimed.claimedAt)
      .returning(['auth_nonce'])
      .executeTakeFirst();
    if (forgotten) {
      await this.db
        .deleteFrom('x402_payment_ids')
        .where((eb: any) => eb.and(claimed.key))
        .execute();
    }
  }

  /** Sent, not seen included: kept with its hash, dated back so the next presentation or pass takes it over at once. */
  async releasePending(claimed: ClaimedAuthorization, txHash: string, staleBefore: Date): Promise<void> {
    await this.db
      .updateTable('x402_authorizations')
      .set((eb: any) => ({
        tx_hash: txHash,
        attempts: eb('attempts', '+', 1),
        updated_at: new Date(staleBefore.getTime() - 1),
      }))
      .where((eb: any) => eb.and(claimed.key))
      .where('state', '=', 'submitting')
      .where('updated_at', '=', claimed.claimedAt)
      .execute();
  }

  /** Takes over a sent authorization nobody holds (released, or stale); undefined when someone holds it. */
  async takeOverPending(key: AuthorizationKey, staleBefore: Date): Promise<AuthorizationRow | undefined> {
    const { rows } = await sql<AuthorizationRow>`
      update x402_authorizations set updated_at = ${this.now()}
        where chain_id = ${key.chain_id} and token = ${key.token} and payer = ${key.payer}
          and auth_nonce = ${key.auth_nonce} and state = 'submitting' and tx_hash is not null
          and updated_at < ${staleBefore}
        returning *`.execute(this.db);
    return rows[0];
  }

  /** With the settlement when its transfer paid for something else; false when someone else finished it first. */
  async markRefused(key: AuthorizationKey, reason: string, settlement?: Settlement): Promise<boolean> {
    const updated = await this.db
      .updateTable('x402_authorizations')
      .set({
        state: 'refused',
        reason,
        ...(settlement ? { tx_hash: settlement.txHash, log_index: settlement.logIndex } : {}),
        updated_at: this.now(),
      })
      .where((eb: any) => eb.and(key))
      .where('state', '=', 'submitting')
      .returning(['state'])
      .executeTakeFirst();
    return updated !== undefined;
  }

  /** The settlement, recorded by one statement of a batch of claims (PaymentClaimRows.insertRecorded). */
  settlementStatement(key: AuthorizationKey, record: Settlement): RecordStatement {
    return {
      kind: 'x402_settlement',
      columns: SETTLEMENT_COLUMNS,
      values: [
        key.chain_id,
        key.token,
        key.payer,
        key.auth_nonce,
        record.txHash,
        record.logIndex,
        this.now(),
      ],
      statement: (records, claims) => sql`
        update x402_authorizations a
          set state = case when c.id is not null then 'settled' else 'refused' end,
            reason = case when c.id is not null then null else 'transfer_already_claimed' end,
            tx_hash = x.tx_hash, log_index = x.log_index, claim_id = c.id, updated_at = x.updated_at
          from ${records} x join ${claims} c using (batch_index)
          where a.chain_id = x.chain_id and a.token = x.token and a.payer = x.payer
            and a.auth_nonce = x.auth_nonce and a.state = 'submitting'
          returning x.batch_index`,
    };
  }

  async settledClaim(key: AuthorizationKey, txHash: string): Promise<PaymentClaim | undefined> {
    const row = await this.find(key);
    if (row?.state !== 'settled' || !row.claim_id || row.tx_hash !== txHash) return undefined;
    return this.claimById(row.claim_id);
  }

  claimById(id: string): Promise<PaymentClaim | undefined> {
    return this.db
      .selectFrom('payment_claims')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst() as Promise<PaymentClaim | undefined>;
  }

  /** Takes over rows `submitting` since before `stale`, oldest first, renewed; rows another pass is taking are skipped. */
  async takeOverStale(stale: Date, limit: number): Promise<AuthorizationRow[]> {
    const { rows } = await sql<AuthorizationRow>`
      update x402_authorizations a set updated_at = ${this.now()}
        from (select chain_id, token, payer, auth_nonce from x402_authorizations
                where state = 'submitting' and updated_at < ${stale}
                order by updated_at limit ${limit} for update skip locked) s
        where a.chain_id = s.chain_id and a.token = s.token and a.payer = s.payer and a.auth_nonce = s.auth_nonce
        returning a.*`.execute(this.db);
    return rows;
  }

  async countAttempt(key: AuthorizationKey): Promise<void> {
    await this.db
      .updateTable('x402_authorizations')
      .set((eb: any) => ({ attempts: eb('attempts', '+', 1), updated_at: this.now() }))
      .where((eb: any) => eb.and(key))
      .execute();
  }
}

export const keyOfRow = (row: AuthorizationKey): AuthorizationKey => ({
  chain_id: row.chain_id,
  token: row.token,
  payer: row.payer,
  auth_nonce: row.auth_nonce,
});

export function authorizationOfRow(row: AuthorizationRow): TransferAuthorization {
  return {
    from: row.payer,
    to: row.to_address,
    value: row.value_micro.toString(),
    validAfter: row.valid_after.toString(),
    validBefore: row.valid_before.toString(),
    nonce: row.auth_nonce,
  };
}

export const purchaseOfRow = (row: AuthorizationRow): Purchase =>
  ({ ...row.purchase, priceMicro: BigInt(row.purchase.priceMicro) }) as Purchase;
