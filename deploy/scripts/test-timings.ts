/**
 * Rewrites jest.timings.json (the suite times jest.sequencer.js orders a run by) from a whole run's results:
 *   tsx deploy/scripts/with-infra.ts jest --ci --json --outputFile=/tmp/run.json
 *   tsx deploy/scripts/test-timings.ts /tmp/run.json
 * A suite that passed gets the wall time it took in that run; one that failed keeps the time the file had (a failure
 * is often much faster or much slower than a pass); suites that no longer exist are dropped. Also prints the run's
 * twenty longest suites.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.join(__dirname, '../..');
const TIMINGS_FILE = path.join(ROOT, 'jest.timings.json');

interface JestJson {
  testResults: Array<{ name: string; status: string; startTime: number; endTime: number }>;
}

function main(): void {
  const [resultsFile] = process.argv.slice(2);
  if (!resultsFile) {
    console.error('usage: test-timings.ts <jest --json output>');
    process.exit(2);
  }
  const results = JSON.parse(readFileSync(resultsFile, 'utf8')) as JestJson;
  const previous: Record<string, number> = existsSync(TIMINGS_FILE)
    ? (JSON.parse(readFileSync(TIMINGS_FILE, 'utf8')).seconds ?? {})
    : {};
  const seconds: Record<string, number> = {};
  for (const [suite, time] of Object.entries(previous)) {
    if (existsSync(path.join(ROOT, suite))) seconds[suite] = time;
  }
  for (const result of results.testResults) {
    if (result.status !== 'passed') continue;
    const suite = path.relative(ROOT, result.name).split(path.sep).join('/');
    seconds[suite] = Math.round((result.endTime - result.startTime) / 100) / 10;
  }
  const sorted = Object.fromEntries(
    Object.entries(seconds).sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1)),
  );
  writeFileSync(
    TIMINGS_FILE,
    `${JSON.stringify(
      {
        about:
          'Wall seconds of each suite in a whole make test on the 2-core machine; jest.sequencer.js runs the longest first. Rewrite: tsx deploy/scripts/test-timings.ts <jest --json output>.',
        seconds: sorted,
      },
      null,
      2,
    )}\n`,
  );
  const failed = results.testResults.filter((r) => r.status !== 'passed').length;
  console.log(
    `${Object.keys(sorted).length} suites timed (${failed} of this run's failed and kept their earlier time); longest:`,
  );
  for (const [suite, time] of Object.entries(sorted).slice(0, 20))
    console.log(`${time.toFixed(1)} s\t${suite}`);
}

main();
