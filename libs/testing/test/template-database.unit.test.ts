import { readFileSync } from 'node:fs';
import path from 'node:path';
import { templateInputFiles } from '../src/template-database';

const ROOT = path.join(__dirname, '../../..');

describe('the migrated template database', () => {
  it('is named by every locked migration, the libraries’ as well as the services’', () => {
    const locked = Object.keys(
      JSON.parse(readFileSync(path.join(ROOT, 'deploy/migrations.lock.json'), 'utf8')) as Record<
        string,
        string
      >,
    );
    const inputs = new Set(templateInputFiles().map((file) => path.relative(ROOT, file)));
    expect(locked.filter((file) => file.startsWith('libs/')).length).toBeGreaterThan(0);
    expect(locked.filter((file) => !inputs.has(file))).toEqual([]);
  });
});
