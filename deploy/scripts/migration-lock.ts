import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.join(__dirname, '../..');
export const LOCK_PATH = path.join(ROOT, 'deploy/migrations.lock.json');

/** Every service migration file (services/<name>/migrations/<date>-<name>.ts), by repo-relative path. */
export function currentMigrationHashes(): Record<string, string> {
  const hashes: Record<string, string> = {};
  for (const service of readdirSync(path.join(ROOT, 'services')).sort()) {
    const dir = path.join(ROOT, 'services', service, 'migrations');
    if (!existsSync(dir)) continue;
    for (const file of readdirSync(dir).sort()) {
      if (!/^\d{4}-\d{2}-\d{2}-\d{4}-.+\.ts$/.test(file)) continue;
      const relative = `services/${service}/migrations/${file}`;
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
