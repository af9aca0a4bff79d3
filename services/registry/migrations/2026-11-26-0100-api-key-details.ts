import { type Kysely, type Migration, sql } from 'kysely';

/**
 * What a seller sees of its API keys (never the key): a name, the last four characters, when it was made and
 * last used; the same for the previous key during a rotation's overlap. Keys made before this have no hint
 * (null) and their creation time is the account's. Frozen.
 */
export const apiKeyDetails: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table sellers
        add column api_key_name text not null default 'Secret key'
          check (char_length(api_key_name) between 1 and 60),
        add column api_key_hint text check (api_key_hint ~ '^[A-Za-z0-9_-]{4}$'),
        add column api_key_created_at timestamptz not null default now(),
        add column api_key_last_used_at timestamptz,
        add column previous_api_key_name text check (char_length(previous_api_key_name) between 1 and 60),
        add column previous_api_key_hint text check (previous_api_key_hint ~ '^[A-Za-z0-9_-]{4}$'),
        add column previous_api_key_created_at timestamptz,
        add column previous_api_key_last_used_at timestamptz`.execute(db);
    await sql`update sellers set api_key_created_at = created_at`.execute(db);
  },
};
