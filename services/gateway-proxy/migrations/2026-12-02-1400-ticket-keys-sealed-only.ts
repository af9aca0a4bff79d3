import { type Kysely, type Migration, sql } from 'kysely';

/** Ticket signing keys are kept sealed only (private_key_sealed): the plaintext column goes, the sealed one is required. */
export const ticketKeysSealedOnly: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`
      alter table ticket_keys drop constraint ticket_keys_check;
      alter table ticket_keys drop column private_key_pem;
      alter table ticket_keys alter column private_key_sealed set not null`.execute(db);
  },
};
