/**
 * Each service's migrations (its baseline and whatever came after, with the libraries' tables it lists and its
 * repeatable SQL) build the schema recorded in deploy/schema/<service>.txt: tables, columns, constraints, indexes,
 * sequences, functions, triggers, views, grants and the rows migrations seed, read from the catalog.
 * deploy/scripts/schema-snapshot.ts --compare <ref> compared the baseline with the chain it replaced
 * (pg_dump --schema-only too). After adding a migration, record what it changes:
 *
 *   tsx deploy/scripts/with-infra.ts tsx deploy/scripts/schema-snapshot.ts --write
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TEST_DATABASE_URL } from '@paygate/testing';
import { describeMigrated, migratedServices, SNAPSHOT_DIR } from '../scripts/schema-snapshot';

describe.each(migratedServices())('the %s schema', (service) => {
  it('is what deploy/schema records', async () => {
    const { catalog } = await describeMigrated(TEST_DATABASE_URL, service);
    expect(catalog).toBe(readFileSync(path.join(SNAPSHOT_DIR, `${service}.txt`), 'utf8'));
  });
});
