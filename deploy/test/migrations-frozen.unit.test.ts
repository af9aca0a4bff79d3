/**
 * Committed migrations are frozen: a migration that ran somewhere must never change, or two databases that
 * both say "migrated" differ. deploy/migrations.lock.json holds each migration file's sha256.
 *
 *   npx jest deploy/test/migrations-frozen
 */
import { currentMigrationHashes, readMigrationLock } from '../scripts/migration-lock';

const locked = readMigrationLock();
const current = currentMigrationHashes();

describe('committed migrations', () => {
  test('none changed or disappeared since it was locked', () => {
    const changed = Object.keys(locked).filter((file) => current[file] !== locked[file]);
    expect(changed).toEqual([]);
  });

  test('every migration is locked (run `pnpm exec tsx deploy/scripts/lock-migrations.ts` after adding one)', () => {
    const unlocked = Object.keys(current).filter((file) => locked[file] === undefined);
    expect(unlocked).toEqual([]);
  });
});
