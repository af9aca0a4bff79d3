/**
 * `make bench`: runs every benchmark (bench/<name>/run.ts) one after another, each in its own process so one
 * cannot skew another. Each writes bench/results/<name>.json and its section of docs/benchmarks.md. A benchmark with
 * a baseline.ts runs that instead: it runs run.ts alternately beside the code it replaced, so its figure is a ratio
 * of one run on one host.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

const root = path.join(__dirname, '..');
const only = process.argv.slice(2);
const names = readdirSync(__dirname, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && existsSync(path.join(__dirname, entry.name, 'run.ts')))
  .map((entry) => entry.name)
  .filter((name) => only.length === 0 || only.includes(name))
  .sort();

let failed = 0;
for (const name of names) {
  console.log(`\n=== bench/${name} ===`);
  const started = Date.now();
  const baseline = path.join(__dirname, name, 'baseline.ts');
  const script = existsSync(baseline) ? baseline : path.join(__dirname, name, 'run.ts');
  const result = spawnSync(process.execPath, ['--import', 'tsx', script], {
    cwd: root,
    stdio: 'inherit',
    env: process.env,
    timeout: 15 * 60_000,
  });
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (result.status !== 0) {
    failed++;
    console.log(`bench/${name} FAILED (exit ${result.status ?? result.signal}) after ${seconds} s`);
  } else {
    console.log(`bench/${name} done in ${seconds} s`);
  }
}
console.log(
  `\n${names.length - failed} benchmarks passed, ${failed} failed; results in bench/results/, summary in docs/benchmarks.md`,
);
process.exit(failed > 0 ? 1 : 0);
