import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.join(__dirname, '../..');
export const LOCK_PATH = path.join(ROOT, 'deploy/migrations.lock.json');

/** The folders that hold dated migration files: each service's migrations/, and each library's src/migrations/. */
function migrationDirs(): string[] {
  const of = (parent: string, inner: string) =>
    readdirSync(path.join(ROOT, parent))
      .sort()
      .map((name) => `${parent}/${name}/${inner}`);
  return [...of('libs', 'src/migrations'), ...of('services', 'migrations')].filter((dir) =>
    existsSync(path.join(ROOT, dir)),
  );
}

/** Every dated migration file (`<dir>/<date>-<name>.ts`), by repo-relative path, with its sha256. */
export function currentMigrationHashes(): Record<string, string> {
  const hashes: Record<string, string> = {};
  for (const dir of migrationDirs()) {
    for (const file of readdirSync(path.join(ROOT, dir)).sort()) {
      if (!/^\d{4}-\d{2}-\d{2}-\d{4}-.+\.ts$/.test(file)) continue;
      const relative = `${dir}/${file}`;
      hashes[relative] = createHash('sha256')
        .update(readFileSync(path.join(ROOT, relative)))
        .digest('hex');
    }
  }
  return hashes;
}

export function readMigrationLock(): Record<string, string> {
  return existsSync(LOCK_PATH) ? JSON.parse(readFileSync(LOCK_PATH, 'utf8')) : {};
}
