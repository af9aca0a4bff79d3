import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Ticket signing keys are stored sealed (AES-256-GCM under TICKET_KEY_ENCRYPTION_KEY), like the registry's
 * webhook secrets: private_key_sealed replaces the plaintext PEM, which the gateway seals and clears at start
 * for rows written before this migration. Frozen.
 */
export const ticketKeysSealed: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table ticket_keys
        add column private_key_sealed text,
        alter column private_key_pem drop not null,
        add check (private_key_pem is not null or private_key_sealed is not null)`.execute(db);
  },
};
