/**
 * The public SDKs' versions are managed with changesets (.changeset/README.md): each CHANGELOG.md starts at the
 * package's version, every pending changeset names only public packages with a valid bump, and the changesets
 * configuration versions the public packages and nothing else.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.join(__dirname, '../..');
const PUBLIC = ['libs/agent-client', 'libs/gateway-middleware', 'libs/checkout-widget', 'libs/mcp-paywall'];

interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  license?: string;
  dependencies?: Record<string, string>;
}
const manifestOf = (dir: string): Manifest =>
  JSON.parse(readFileSync(path.join(ROOT, dir, 'package.json'), 'utf8'));
const workspaceDirs = ['libs', 'services'].flatMap((parent) =>
  readdirSync(path.join(ROOT, parent)).map((name) => `${parent}/${name}`),
);
const workspace = [...workspaceDirs, 'deploy', 'bench'].map((dir) => ({ dir, manifest: manifestOf(dir) }));

describe('SDK versions and changelogs', () => {
  it.each(PUBLIC)("%s: public, MIT, and its CHANGELOG.md starts at the package's version", (dir) => {
    const manifest = manifestOf(dir);
    expect(manifest.private).toBeUndefined();
    expect(manifest.license).toBe('MIT');
    expect(manifest.version).toMatch(/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/);
    const changelog = readFileSync(path.join(ROOT, dir, 'CHANGELOG.md'), 'utf8');
    expect(changelog.split('\n')[0]).toBe(`# ${manifest.name}`);
    expect(changelog.match(/^## (\S+)/m)?.[1]).toBe(manifest.version);
    expect(readFileSync(path.join(ROOT, dir, 'LICENSE'), 'utf8')).toMatch(/^MIT License/);
  });

  it('every other workspace package is private', () => {
    const published = workspace.filter((w) => !w.manifest.private).map((w) => w.dir);
    expect(published.sort()).toEqual([...PUBLIC].sort());
  });

  it('pending changesets name only public packages, with patch, minor or major', () => {
    const names = new Set(PUBLIC.map((dir) => manifestOf(dir).name));
    const dir = path.join(ROOT, '.changeset');
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.md') && f !== 'README.md')) {
      const text = readFileSync(path.join(dir, file), 'utf8');
      const front = text.match(/^---\n([\s\S]*?)\n---\n([\s\S]*)$/);
      expect(front).not.toBeNull();
      const bumps = front![1]!.split('\n').filter((line) => line.trim() !== '');
      expect(bumps.length).toBeGreaterThan(0);
      for (const line of bumps) {
        const [, pkg, bump] = line.match(/^"([^"]+)": (patch|minor|major)$/) ?? [];
        expect({ file, pkg, bump }).toEqual({ file, pkg: expect.any(String), bump: expect.any(String) });
        expect(names.has(pkg!)).toBe(true);
      }
      expect(front![2]!.trim().length).toBeGreaterThan(10);
    }
  });

  it('changesets versions the public packages and the private libraries they inline, and ignores the rest', () => {
    const config = JSON.parse(readFileSync(path.join(ROOT, '.changeset/config.json'), 'utf8'));
    const publicNames = new Set(PUBLIC.map((dir) => manifestOf(dir).name));
    const inlined = new Set(
      PUBLIC.flatMap((dir) =>
        Object.keys(manifestOf(dir).dependencies ?? {}).filter((name) => name.startsWith('@paygate/')),
      ),
    );
    const expectedIgnore = workspace
      .map((w) => w.manifest.name)
      .filter((name) => !publicNames.has(name) && !inlined.has(name))
      .sort();
    expect([...config.ignore].sort()).toEqual(expectedIgnore);
    expect(config.access).toBe('public');
  });
});
