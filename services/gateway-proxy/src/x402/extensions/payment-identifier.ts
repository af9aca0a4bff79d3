import { createHash } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import type { GatewayDatabase } from '../../db';
import { type AuthorizationKey, keyOfRow } from '../mechanisms/exact-evm/authorizations';

interface PaymentIdUse {
  payer: string;
  id: string;
  fingerprint: string;
}

type PaymentIdBinding = { kind: 'bound'; key: AuthorizationKey; fresh: boolean } | { kind: 'conflict' };

/** Each part length-prefixed, so two requests agree only when every part does. */
export function requestFingerprint(parts: readonly string[]): string {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(`${Buffer.byteLength(part)}:${part}\n`);
  return hash.digest('hex');
}

/** x402's payment-identifier in `x402_payment_ids`, per payer (proven by the signature), seen by every replica. */
export class X402PaymentIds {
  constructor(
    private readonly db: Kysely<GatewayDatabase>,
    private readonly now: () => Date,
  ) {}

  /** Binds the id, or says what it is bound to; one bound to an authorization that paid nothing is rebound here. */
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
    const bound = keyOfRow(existing);
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

  async forgetOlderThan(before: Date, limit: number): Promise<void> {
    await sql`
      delete from x402_payment_ids where (payer, payment_id) in (
        select payer, payment_id from x402_payment_ids where created_at < ${before}
          order by created_at limit ${limit})`.execute(this.db);
  }
}
