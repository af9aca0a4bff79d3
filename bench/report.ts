import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const RESULTS_DIR = path.join(__dirname, 'results');
const DOC = path.join(__dirname, '../docs/benchmarks.md');

/** Writes bench/results/<name>.json. */
export function writeResults(name: string, results: unknown): void {
  mkdirSync(RESULTS_DIR, { recursive: true });
  writeFileSync(
    path.join(RESULTS_DIR, `${name}.json`),
    `${JSON.stringify({ measuredAt: new Date().toISOString(), machine: machineSummary(), results }, null, 2)}\n`,
  );
}

/** Replaces the section between <!-- name:start --> and <!-- name:end --> in docs/benchmarks.md (appends it if absent). */
export function writeDocSection(name: string, markdown: string): void {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  let doc = '';
  try {
    doc = readFileSync(DOC, 'utf8');
  } catch {
    doc = '# Benchmarks\n\nRun them with `make bench`. Each section below is rewritten by its benchmark.\n';
  }
  const block = `${start}\n${markdown.trim()}\n${end}`;
  const from = doc.indexOf(start);
  const to = doc.indexOf(end);
  doc =
    from >= 0 && to > from
      ? doc.slice(0, from) + block + doc.slice(to + end.length)
      : `${doc.trimEnd()}\n\n${block}\n`;
  writeFileSync(DOC, doc);
}

export function machineSummary(): string {
  const os = require('node:os') as typeof import('node:os');
  return `${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, node ${process.version}`;
}

export function percentile(sortedValues: number[], p: number): number {
  if (sortedValues.length === 0) return Number.NaN;
  const index = Math.min(sortedValues.length - 1, Math.ceil((p / 100) * sortedValues.length) - 1);
  return sortedValues[Math.max(0, index)]!;
}
