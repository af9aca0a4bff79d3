/**
 * Records the sha256 of every committed migration file in deploy/migrations.lock.json.
 * Run it after ADDING a migration: `pnpm exec tsx deploy/scripts/lock-migrations.ts`.
 * It refuses to change the hash of a migration already locked: committed migrations are frozen (a change goes
 * into a new migration, or into the service's repeatable sql/ file for functions and views).
 */
import { writeFileSync } from 'node:fs';
import { currentMigrationHashes, LOCK_PATH, readMigrationLock } from './migration-lock';

const locked = readMigrationLock();
const current = currentMigrationHashes();
const changed = Object.keys(locked).filter(
  (file) => current[file] !== undefined && current[file] !== locked[file],
);
if (changed.length > 0 && !process.argv.includes('--force')) {
  console.error(`refusing to re-lock changed migrations (they are frozen): ${changed.join(', ')}`);
  process.exit(1);
}
writeFileSync(LOCK_PATH, `${JSON.stringify(current, null, 2)}\n`);
console.log(`locked ${Object.keys(current).length} migrations in ${LOCK_PATH}`);
