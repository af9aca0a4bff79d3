/**
 * The code's size and shape measures (docs/benchmarks.md, "Code measures"), over `services/*\/src` and `libs/*\/src` (.ts and .tsx):
 * `tsx deploy/scripts/code-measures.ts [repo root]`. Prints lines per package and the totals as JSON.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const LONG_FUNCTION_LINES = 70;
const root = process.argv[2] ?? process.cwd();

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(name) ? [path] : [];
  });
}

function longFunctions(path: string, text: string): string[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = file.getLineAndCharacterOfPosition(node.getStart()).line;
      const end = file.getLineAndCharacterOfPosition(node.getEnd()).line;
      if (end - start + 1 > LONG_FUNCTION_LINES)
        found.push(`${relative(root, path)}:${start + 1} (${end - start + 1})`);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

const packages = ['services', 'libs'].flatMap((group) =>
  readdirSync(join(root, group))
    .map((name) => join(group, name, 'src'))
    .filter((dir) => statSync(join(root, dir), { throwIfNoEntry: false })?.isDirectory()),
);

const totals = { lines: 0, untypedDatabaseHandles: 0, bareErrorThrows: 0, errorClasses: 0 };
const linesByPackage: Record<string, number> = {};
const overLong: string[] = [];
for (const dir of packages) {
  let lines = 0;
  for (const path of sourceFiles(join(root, dir))) {
    const text = readFileSync(path, 'utf8');
    lines += text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    totals.untypedDatabaseHandles += (text.match(/\b(Kysely|Transaction)<any>/g) ?? []).length;
    totals.bareErrorThrows += (text.match(/throw new Error\(/g) ?? []).length;
    totals.errorClasses += (text.match(/class \w+ extends \w*Error\b/g) ?? []).length;
    overLong.push(...longFunctions(path, text));
  }
  linesByPackage[dir] = lines;
  totals.lines += lines;
}

console.log(
  JSON.stringify(
    {
      ...totals,
      functionsOverLimit: overLong.length,
      longFunctionLimitLines: LONG_FUNCTION_LINES,
      linesByPackage,
      overLong,
    },
    null,
    2,
  ),
);
