/**
 * Records the sha256 of every committed migration file (services/<name>/migrations/, libs/<name>/src/migrations/) in
 * deploy/migrations.lock.json. Run it after ADDING a migration: `pnpm exec tsx deploy/scripts/lock-migrations.ts`.
 * It refuses to change the hash of a migration already locked, or to drop one: committed migrations are frozen (a
 * change goes into a new migration, or into the service's repeatable sql/ file for functions and views). `--force`
 * re-locks whatever is there, for a new baseline that replaces a chain while no deployment holds data.
 */
import { writeFileSync } from 'node:fs';
import { currentMigrationHashes, LOCK_PATH, readMigrationLock } from './migration-lock';

const locked = readMigrationLock();
const current = currentMigrationHashes();
const changed = Object.keys(locked).filter((file) => current[file] !== locked[file]);
if (changed.length > 0 && !process.argv.includes('--force')) {
  console.error(`refusing to re-lock changed or removed migrations (they are frozen): ${changed.join(', ')}`);
  process.exit(1);
}
writeFileSync(LOCK_PATH, `${JSON.stringify(current, null, 2)}\n`);
console.log(`locked ${Object.keys(current).length} migrations in ${LOCK_PATH}`);
