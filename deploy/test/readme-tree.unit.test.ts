/**
 * Each package README's folder table (`| folder | owns |`: how a request or event flows through `src/`) says where
 * things live, so it is checked against the tree: every path of its first column exists under src/; every file its
 * second column names (`name.ts`) exists, in the row's folder (or src/, the package, the repository); a bare module
 * name in a row of one folder (`verify`) is that folder's `verify.ts` (or subfolder); and every folder directly
 * under src/ is in the table, so a newcomer reading it finds each one.
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
