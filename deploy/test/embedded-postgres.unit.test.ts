/**
 * The check behind embedded Postgres as root: Postgres runs as the user "postgres", who must be able to enter every
 * directory above the binaries and the data. A clone in a folder other users cannot enter (mode 0700, like /root)
 * is found, and the message says which directory, its mode, and how to fix it.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { blockedPostgresMessage, firstBlockedDirectory } from '../dev/embedded-postgres';

describe('whether the postgres user can reach a path', () => {
  let home: string;
  let clone: string;
  // Not the owner of the test's directories, in none of their groups.
  const stranger = { name: 'postgres', uid: 4_000_123, gids: [4_000_123] };

  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), 'pg-reach-'));
    clone = path.join(home, 'paygate');
    mkdirSync(path.join(clone, 'node_modules', 'bin'), { recursive: true });
  });
  afterEach(() => {
    chmodSync(home, 0o700);
    rmSync(home, { recursive: true, force: true });
  });

  it('finds the 0700 ancestor above the binaries', () => {
    chmodSync(home, 0o700);
    expect(firstBlockedDirectory(path.join(clone, 'node_modules', 'bin'), stranger)).toEqual({
      dir: home,
      mode: 0o700,
      ownerUid: process.getuid!(),
    });
  });

  it('checks the part of the path that exists (a data directory not created yet)', () => {
    chmodSync(home, 0o700);
    expect(firstBlockedDirectory(path.join(clone, '.dev', 'postgres-5432'), stranger)?.dir).toBe(home);
  });

  it('gets through directories others may enter (0711, 0755), and everywhere as root or as the owner', () => {
    chmodSync(home, 0o711);
    expect(firstBlockedDirectory(path.join(clone, 'node_modules', 'bin'), stranger)).toBeUndefined();
    chmodSync(home, 0o755);
    expect(firstBlockedDirectory(clone, stranger)).toBeUndefined();
    chmodSync(home, 0o700);
    expect(firstBlockedDirectory(clone, { name: 'root', uid: 0, gids: [0] })).toBeUndefined();
    expect(firstBlockedDirectory(clone, { name: 'me', uid: process.getuid!(), gids: [] })).toBeUndefined();
  });

  it("uses the group's bit for a member of the directory's group", () => {
    chmodSync(home, 0o710);
    const member = { ...stranger, gids: [process.getgid!()] };
    expect(firstBlockedDirectory(clone, member)).toBeUndefined();
    expect(firstBlockedDirectory(clone, stranger)?.dir).toBe(home);
  });

  it('says what is wrong and how to fix it', () => {
    chmodSync(home, 0o700);
    const blocked = firstBlockedDirectory(path.join(clone, 'node_modules', 'bin'), stranger)!;
    const message = blockedPostgresMessage(blocked, stranger, 'the Postgres binaries', 'root');
    expect(message).toBe(
      'embedded Postgres cannot start: as root it runs initdb and postgres as the user "postgres" (Postgres ' +
        `refuses to run as root), and that user cannot enter ${home} (mode 0700, owner root), on the way to the ` +
        'Postgres binaries. Fix one of: run a Postgres of your own and set DATABASE_URL (e.g. apt-get install ' +
        'postgresql), clone Paygate into a folder other users can enter (e.g. /srv/paygate), or let them through ' +
        `with chmod o+x ${home}`,
    );
  });
});
