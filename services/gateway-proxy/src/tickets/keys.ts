import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import type { SecretBox } from '@paygate/runtime';
import { calculateJwkThumbprint, exportJWK } from 'jose';
import { type Kysely, sql } from 'kysely';
import type { GatewayDatabase } from '../db';
import { TicketKeyError } from '../errors';

interface SigningKey {
  kid: string;
  privateKey: KeyObject;
}

/** The key id is the key's RFC 7638 thumbprint, so every replica names a key the same way. */
async function describe(privateKey: KeyObject) {
  const exported = await exportJWK(createPublicKey(privateKey));
  if (exported.kty !== 'EC' || exported.crv !== 'P-256' || !exported.x || !exported.y) {
    throw new TicketKeyError('TICKET_SIGNING_KEY must be an EC P-256 key (ES256)');
  }
  const kid = await calculateJwkThumbprint(exported, 'sha256');
  return {
    kid,
    jwk: { kty: 'EC', crv: 'P-256', x: exported.x, y: exported.y, kid, alg: 'ES256', use: 'sig' } as const,
    pem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
  };
}

type PublicJwk = Awaited<ReturnType<typeof describe>>['jwk'];

const MAX_PUBLISHED_KEYS = 10;
const JWKS_REFRESH_MS = 60_000;

/** Sealed at rest; generated once under an advisory lock when not configured; old keys stay in the JWKS. */
export class TicketKeyStore {
  private signing: SigningKey | undefined;
  private jwks: PublicJwk[] = [];
  private jwksLoadedAt = 0;

  constructor(
    private readonly db: Kysely<GatewayDatabase>,
    private readonly configuredPem: string | undefined,
    private readonly box: SecretBox,
  ) {}

  async init(): Promise<void> {
    if (this.configuredPem) this.signing = await this.store(this.db, createPrivateKey(this.configuredPem));
    else {
      this.signing = await this.db.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(hashtext(current_schema() || '.ticket_keys'))`.execute(trx);
        const newest = await trx
          .selectFrom('ticket_keys')
          .select(['kid', 'private_key_sealed'])
          .orderBy('created_at', 'desc')
          .limit(1)
          .executeTakeFirst();
        if (newest) return { kid: newest.kid, privateKey: createPrivateKey(this.openKey(newest)) };
        return this.store(trx, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey);
      });
    }
    await this.refreshJwks();
  }

  /** Sealed under its thumbprint; the configured key is stored once, whichever replica starts first. */
  private async store(db: Kysely<GatewayDatabase>, privateKey: KeyObject): Promise<SigningKey> {
    const { kid, jwk, pem } = await describe(privateKey);
    await sql`insert into ticket_keys (kid, private_key_sealed, public_jwk) values (${kid}, ${this.box.seal(pem)}, ${JSON.stringify(jwk)}::jsonb)
      on conflict (kid) do nothing`.execute(db);
    return { kid, privateKey };
  }

  private openKey(row: { kid: string; private_key_sealed: string }): string {
    try {
      return this.box.open(row.private_key_sealed);
    } catch {
      throw new TicketKeyError(
        `ticket key ${row.kid} cannot be opened with TICKET_KEY_ENCRYPTION_KEY (changed since it was sealed?)`,
      );
    }
  }

  signingKey(): SigningKey {
    if (!this.signing) throw new TicketKeyError('TicketKeyStore.init() was not called');
    return this.signing;
  }

  private async refreshJwks(): Promise<void> {
    const rows = await this.db
      .selectFrom('ticket_keys')
      .select(['public_jwk'])
      .orderBy('created_at', 'desc')
      .limit(MAX_PUBLISHED_KEYS)
      .execute();
    this.jwks = rows.map((row) => row.public_jwk as PublicJwk);
    this.jwksLoadedAt = Date.now();
  }

  /** Newest first; re-read now and then so keys recorded by other replicas appear. */
  async publicKeys(): Promise<PublicJwk[]> {
    if (Date.now() - this.jwksLoadedAt > JWKS_REFRESH_MS) await this.refreshJwks();
    return this.jwks;
  }
}
