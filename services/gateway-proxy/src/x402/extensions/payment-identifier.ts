import { createHash } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import type { GatewayDatabase } from '../../db';
import type { AuthorizationKey } from '../mechanisms/exact-evm/authorizations';

/** What a payment-identifier binds: the id, its payer, and the request it was first sent with. */
export interface PaymentIdUse {
  payer: string;
  id: string;
  fingerprint: string;
}

/** The id's purchase: the same request paid by this authorization (`bound`), or another request (`conflict`). */
export type PaymentIdBinding =
  | { kind: 'bound'; key: AuthorizationKey; fresh: boolean }
  | { kind: 'conflict' };

/**
 * The request a payment-identifier names, as a digest: its parts joined with a separator no part can hold (each is
 * length-prefixed), so two requests agree only when every part does.
 */
export function requestFingerprint(parts: readonly string[]): string {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(`${Buffer.byteLength(part)}:${part}\n`);
  return hash.digest('hex');
}

/**
 * x402's payment-identifier extension, kept in Postgres (`x402_payment_ids`, unique on payer and id): the first
 * presentation of an id binds it to its request and the authorization paying for it, on whichever replica, and
 * survives a restart. Scoped by the payer the authorization's signature proves, so nobody can answer another
 * wallet's id.
 */
export class X402PaymentIds {
  constructor(
    private readonly db: Kysely<GatewayDatabase>,
    private readonly now: () => Date,
  ) {}

  /**
   * Binds the id to this request and authorization, or says what it is bound to. An id bound to an authorization
   * that paid nothing (refused for good: `paidNothing`) is bound to this one instead, so a refused payment can be
   * signed again under the same id; one given back before anything was sent drops its ids (X402Authorizations.forget).
   */
  async bind(
    use: PaymentIdUse,
    key: AuthorizationKey,
    paidNothing: (bound: AuthorizationKey, boundAt: Date) => Promise<boolean>,
  ): Promise<PaymentIdBinding> {
    const now = this.now();
    const row = {
      payer: use.payer.toLowerCase(),
      payment_id: use.id,
      fingerprint: use.fingerprint,
      chain_id: key.chain_id,
      token: key.token,
      auth_nonce: key.auth_nonce,
      created_at: now,
      updated_at: now,
    };
    const inserted = await this.db
      .insertInto('x402_payment_ids')
      .values(row)
      .onConflict((oc: any) => oc.columns(['payer', 'payment_id']).doNothing())
      .returning(['payment_id'])
      .executeTakeFirst();
    if (inserted) return { kind: 'bound', key, fresh: true };
    const existing = (await this.db
      .selectFrom('x402_payment_ids')
      .selectAll()
      .where('payer', '=', row.payer)
      .where('payment_id', '=', use.id)
      .executeTakeFirst()) as typeof row | undefined;
    // Removed by the expiry sweep between the two statements: bind afresh next time.
    if (!existing) return { kind: 'bound', key, fresh: true };
    if (existing.fingerprint !== use.fingerprint) return { kind: 'conflict' };
    const bound: AuthorizationKey = {
      chain_id: existing.chain_id,
      token: existing.token,
      payer: existing.payer,
      auth_nonce: existing.auth_nonce,
    };
    if (bound.auth_nonce === key.auth_nonce) return { kind: 'bound', key, fresh: false };
    if (!(await paidNothing(bound, existing.updated_at))) return { kind: 'bound', key: bound, fresh: false };
    // Only from the authorization read above: of two presentations rebinding at once, one wins.
    const rebound = await this.db
      .updateTable('x402_payment_ids')
      .set({ auth_nonce: key.auth_nonce, updated_at: now })
      .where('payer', '=', row.payer)
      .where('payment_id', '=', use.id)
      .where('auth_nonce', '=', bound.auth_nonce)
      .returning(['auth_nonce'])
      .executeTakeFirst();
    return rebound ? { kind: 'bound', key, fresh: true } : this.bind(use, key, async () => false);
  }

  /** Ids older than `before` are forgotten (a bounded batch per call): a purchase is retried within minutes. */
  async forgetOlderThan(before: Date, limit: number): Promise<number> {
    const { rows } = await sql<{ payment_id: string }>`
      delete from x402_payment_ids where (payer, payment_id) in (
        select payer, payment_id from x402_payment_ids where created_at < ${before}
          order by created_at limit ${limit})
      returning payment_id`.execute(this.db);
    return rows.length;
  }
}
