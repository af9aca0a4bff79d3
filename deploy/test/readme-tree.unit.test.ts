/**
 * Each package README's folder table (`| folder | owns |`: how a request or event flows through `src/`) says where
 * things live, so it is checked against the tree: every path of its first column exists under src/; every file its
 * second column names (`name.ts`) exists, in the row's folder (or src/, the package, the repository); a bare module
 * name in a row of one folder (`verify`) is that folder's `verify.ts` (or subfolder); and every folder directly
 * under src/ is in the table, so a newcomer reading it finds each one.
 *
 * Beyond the tables, every README (the repository's, each package's, deploy's, k8s') is held to the files it names
 * anywhere: a path (`src/x402/verify.ts`, `libs/contracts/src/subjects.ts`) exists from the README's folder, its
 * src/, the repository, or the folder of the path named before it on the line (`libs/contracts/src/subjects.ts`,
 * `events/chain-indexer.ts`); a bare source file (`scanner.ts`) exists somewhere in the repository. And every
 * relative link of a README or of docs/ leads to a file that exists, and to a heading of it when it names one.
 *
 *   npx jest deploy/test/readme-tree
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.join(__dirname, '../..');

/** A file name as the tables write one: no spaces, a known extension, maybe folders before it. */
const FILE_NAME = /^[\w.[\]-]+(\/[\w.[\]-]+)*\.(ts|tsx|js|mjs|json|sql|md|html|css)$/;
/** A module named without its extension (`evm-reads`); identifiers and tables have capitals, dots or underscores. */
const MODULE_NAME = /^[a-z]+(-[a-z]+)*$/;

interface FolderRow {
  line: number;
  /** The first column's backticked paths, relative to the package's src/ (a leading `src/` is dropped). */
  paths: string[];
  /** Backticked tokens of the other columns. */
  named: string[];
}

const backticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.trim());
const cellsOf = (line: string) =>
  line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split(/(?<!\\)\|/)
    .map((cell) => cell.trim());

/** The rows of every table in `markdown` whose header's first column is `folder`. */
function folderTableRows(markdown: string): FolderRow[] {
  const lines = markdown.split('\n');
  const rows: FolderRow[] = [];
  let inFolderTable = false;
  lines.forEach((line, index) => {
    if (!line.trim().startsWith('|')) {
      inFolderTable = false;
      return;
    }
    const cells = cellsOf(line);
    if (!lines[index - 1]?.trim().startsWith('|')) {
      inFolderTable = cells[0]?.toLowerCase() === 'folder';
      return;
    }
    if (!inFolderTable || /^\|?\s*:?-{3,}/.test(line.trim())) return;
    rows.push({
      line: index + 1,
      paths: backticked(cells[0] ?? '').map((p) => p.replace(/^src\//, '')),
      named: backticked(cells.slice(1).join(' | ')),
    });
  });
  return rows;
}

const isDirectory = (file: string) => fs.existsSync(file) && fs.statSync(file).isDirectory();

/** What the folder tables of the README of package `dir` (relative to `root`) get wrong; [] when they are true. */
function readmeTreeProblems(root: string, dir: string, rows: FolderRow[]): string[] {
  const src = path.join(root, dir, 'src');
  const problems: string[] = [];
  for (const row of rows) {
    for (const p of row.paths) {
      const exists = p.endsWith('/') ? isDirectory(path.join(src, p)) : fs.existsSync(path.join(src, p));
      if (!exists) problems.push(`line ${row.line}: src/${p} does not exist`);
    }
    const folders = row.paths.map((p) => path.join(src, p.endsWith('/') ? p : path.dirname(p)));
    const bases = [...folders, src, path.join(root, dir), root];
    for (const file of row.named.filter((token) => FILE_NAME.test(token))) {
      if (!bases.some((base) => fs.existsSync(path.join(base, file)))) {
        problems.push(`line ${row.line}: ${file} (row ${row.paths.join(', ')}) does not exist`);
      }
    }
    const [only] = row.paths;
    if (row.paths.length === 1 && only?.endsWith('/')) {
      for (const name of row.named.filter((token) => MODULE_NAME.test(token))) {
        const module = path.join(src, only, name);
        if (!fs.existsSync(`${module}.ts`) && !isDirectory(module)) {
          problems.push(`line ${row.line}: src/${only}${name}.ts (module \`${name}\`) does not exist`);
        }
      }
    }
  }
  const listed = new Set(rows.flatMap((row) => row.paths.map((p) => p.split('/')[0]!)));
  for (const entry of fs.existsSync(src) ? fs.readdirSync(src, { withFileTypes: true }) : []) {
    if (entry.isDirectory() && !listed.has(entry.name))
      problems.push(`src/${entry.name}/ is not in the table`);
  }
  return problems;
}

/** A path a README names: folders, then a file with a known extension (`<name>`, `*` or `$x` make it a pattern). */
const NAMED_PATH =
  /^(\.\/)?[\w.[\]-]+(\/[\w.[\]-]+)+\.(ts|tsx|js|mjs|json|sql|md|html|css|sh|yaml|yml|sol|patch)$/;
/** A source file named alone (`scanner.ts`); `.d.ts` and built `.js` files are outputs, not in the tree. */
const BARE_SOURCE = /^[\w.[\]-]+\.(ts|tsx|sql)$/;
/** Built files (`dist/index.mjs`): made by the build, not kept in the tree. */
const OUTPUT = /(^|\/)dist\//;
const SKIPPED_FOLDERS = new Set([
  'node_modules',
  '.git',
  'dist',
  'artifacts',
  '.dev',
  'bench-compare',
  'coverage',
]);

/** Every file and folder of the repository by path relative to `root`, and every file name. */
function walkTree(root: string): { paths: Set<string>; names: Set<string> } {
  const paths = new Set<string>();
  const names = new Set<string>();
  const visit = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      // Hidden folders are tooling's (.git, .dev, an SDK build's .sdk-build-*), not the tree a reader is shown.
      if (SKIPPED_FOLDERS.has(entry.name) || entry.name.startsWith('.')) continue;
      const relative = dir ? `${dir}/${entry.name}` : entry.name;
      paths.add(relative);
      if (entry.isDirectory()) visit(relative);
      else names.add(entry.name);
    }
  };
  visit('');
  return { paths, names };
}

/** What a README at `readme` (relative to `root`) names that is not there; [] when every file it names exists. */
function namedFileProblems(root: string, readme: string, markdown: string, names: Set<string>): string[] {
  const dir = path.dirname(readme);
  const problems: string[] = [];
  const exists = (file: string) => fs.existsSync(path.join(root, file));
  let inCode = false;
  markdown.split('\n').forEach((line, index) => {
    if (line.trim().startsWith('```')) inCode = !inCode;
    if (inCode) return;
    const foldersBefore: string[] = [];
    for (const raw of backticked(line)) {
      const token = raw.replace(/^\.\//, '');
      if (NAMED_PATH.test(raw) && !OUTPUT.test(token)) {
        const found = [dir, path.join(dir, 'src'), '', ...foldersBefore]
          .map((base) => path.join(base, token))
          .find(exists);
        if (found === undefined) problems.push(`line ${index + 1}: ${raw} does not exist`);
        else foldersBefore.push(path.dirname(found), path.dirname(path.dirname(found)));
      } else if (BARE_SOURCE.test(token) && !token.endsWith('.d.ts') && !names.has(token)) {
        problems.push(`line ${index + 1}: ${raw} is in no folder of the repository`);
      }
    }
  });
  return problems;
}

/** The anchors GitHub gives a markdown file's headings (`## Two words` is `#two-words`; repeats get `-1`, `-2`). */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let inCode = false;
  for (const line of markdown.split('\n')) {
    if (line.trim().startsWith('```')) inCode = !inCode;
    const heading = inCode ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = heading[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  for (const match of markdown.matchAll(/<a (?:name|id)="([^"]+)"/g)) anchors.add(match[1]!);
  return anchors;
}

/** The relative links of the markdown file `file` that lead nowhere: a missing file, or a heading it does not have. */
function brokenLinks(root: string, file: string, markdown: string): string[] {
  const problems: string[] = [];
  let inCode = false;
  markdown.split('\n').forEach((line, index) => {
    if (line.trim().startsWith('```')) inCode = !inCode;
    if (inCode) return;
    for (const [, link] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link!)) continue;
      const [target, anchor] = link!.split('#') as [string, string | undefined];
      const resolved = target ? path.join(path.dirname(file), target) : file;
      if (!fs.existsSync(path.join(root, resolved))) {
        problems.push(`line ${index + 1}: ${link} leads to no file`);
      } else if (anchor && resolved.endsWith('.md')) {
        const anchors = headingAnchors(fs.readFileSync(path.join(root, resolved), 'utf8'));
        if (!anchors.has(anchor)) problems.push(`line ${index + 1}: ${link} names no heading of ${resolved}`);
      }
    }
  });
  return problems;
}

const packageReadmes = ['services', 'libs']
  .flatMap((parent) =>
    fs
      .readdirSync(path.join(ROOT, parent))
      .map((name) => `${parent}/${name}`)
      .filter((dir) => fs.existsSync(path.join(ROOT, dir, 'README.md'))),
  )
  .sort();

const withFolderTables = packageReadmes
  .map((dir) => ({ dir, rows: folderTableRows(fs.readFileSync(path.join(ROOT, dir, 'README.md'), 'utf8')) }))
  .filter(({ rows }) => rows.length > 0);

describe('the folder tables of the package READMEs', () => {
  it('are found where the READMEs have them', () => {
    // A table moved out of the `| folder | owns |` form would silently stop being checked.
    expect(withFolderTables.map(({ dir }) => dir)).toEqual(
      expect.arrayContaining([
        'services/checkout',
        'services/escrow-ledger',
        'services/gateway-proxy',
        'services/notifier',
        'services/registry',
        'services/settlement',
      ]),
    );
  });

  it.each(withFolderTables)('$dir/README.md matches the tree', ({ dir, rows }) => {
    expect(readmeTreeProblems(ROOT, dir, rows)).toEqual([]);
  });

  it('reports a missing folder, file and module, and a folder left out (the check itself)', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'readme-tree-'));
    try {
      for (const file of [
        'src/payments/book.ts',
        'src/x402/verify.ts',
        'src/config.ts',
        'src/unlisted/a.ts',
      ]) {
        fs.mkdirSync(path.dirname(path.join(root, 'pkg', file)), { recursive: true });
        fs.writeFileSync(path.join(root, 'pkg', file), '');
      }
      const readme = [
        '| folder | owns |',
        '|---|---|',
        '| `payments/` | `book.ts` the booking; `refund.ts` refunds; `PaymentService`, `payment_claims` |',
        '| `src/x402/` | `verify` (checks), `settle`, `@x402/evm` |',
        '| `gone/`, `config.ts` | nothing |',
        '',
        '| variable | default |',
        '|---|---|',
        '| `missing/` | not a folder table |',
      ].join('\n');
      expect(readmeTreeProblems(root, 'pkg', folderTableRows(readme))).toEqual([
        'line 3: refund.ts (row payments/) does not exist',
        'line 4: src/x402/settle.ts (module `settle`) does not exist',
        'line 5: src/gone/ does not exist',
        'src/unlisted/ is not in the table',
      ]);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

const tree = walkTree(ROOT);
const readmes = [...tree.paths]
  .filter((file) => path.basename(file) === 'README.md' && !file.startsWith('.'))
  .sort();
const docs = [...tree.paths].filter((file) => file.startsWith('docs/') && file.endsWith('.md')).sort();

describe('the files the READMEs name', () => {
  it('include the repository README, every service and the deployment', () => {
    expect(readmes).toEqual(
      expect.arrayContaining(['README.md', 'services/checkout/README.md', 'k8s/README.md']),
    );
  });

  it("the repository README's layout names every package", () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const layout = /## Repository layout\n+```\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    const listed = new Set(layout.split('\n').map((line) => line.split(/\s+/)[0]));
    const packages = fs.readdirSync(path.join(ROOT, 'libs')).map((name) => `libs/${name}`);
    expect(packages.filter((dir) => !listed.has(dir))).toEqual([]);
    expect(listed.has('services/<name>/')).toBe(true);
  });

  it.each(readmes)('%s names only files that exist', (readme) => {
    expect(
      namedFileProblems(ROOT, readme, fs.readFileSync(path.join(ROOT, readme), 'utf8'), tree.names),
    ).toEqual([]);
  });

  it.each([...readmes, ...docs])('%s links only to files and headings that exist', (file) => {
    expect(brokenLinks(ROOT, file, fs.readFileSync(path.join(ROOT, file), 'utf8'))).toEqual([]);
  });

  it('reports a missing path, bare file, link and heading (the check itself)', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'readme-files-'));
    try {
      for (const file of ['pkg/src/x402/verify.ts', 'libs/contracts/src/events/a.ts', 'docs/api.md']) {
        fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
        fs.writeFileSync(
          path.join(root, file),
          file.endsWith('.md') ? '# API\n\n## Two words: `here`\n' : '',
        );
      }
      const readme = [
        'Verified in `x402/verify.ts` and `src/x402/verify.ts`, not in `x402/settle.ts`.',
        'Truth: `libs/contracts/src/events/a.ts`, `b.ts`; `<name>.ts` and `dist/index.d.ts` are patterns or outputs.',
        'Subjects in `libs/contracts/src/subjects.ts`, `events/a.ts`, `events/b.ts`.',
        '```',
        '`in/code.ts` is an example',
        '```',
        '[API](../docs/api.md#two-words-here), [gone](../docs/gone.md), [heading](../docs/api.md#three-words).',
      ].join('\n');
      expect(namedFileProblems(root, 'pkg/README.md', readme, walkTree(root).names)).toEqual([
        'line 1: x402/settle.ts does not exist',
        'line 2: b.ts is in no folder of the repository',
        'line 3: libs/contracts/src/subjects.ts does not exist',
        'line 3: events/a.ts does not exist',
        'line 3: events/b.ts does not exist',
      ]);
      expect(brokenLinks(root, 'pkg/README.md', readme)).toEqual([
        'line 7: ../docs/gone.md leads to no file',
        'line 7: ../docs/api.md#three-words names no heading of docs/api.md',
      ]);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
