/**
 * `make chaos`: three seeded runs of the whole system under faults (deploy/chaos/run.ts), at most 5 minutes each,
 * each report printed and written to .chaos/<seed>.json. `CHAOS_SEED=<n> make chaos` reproduces one run;
 * `CHAOS_PROFILE=short` runs the lighter profile the test suite uses. Exit code 1 when an invariant failed.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { newSeed } from './prng';
import { PROFILES } from './profiles';
import { renderReport } from './report';
import { runChaos } from './run';

async function main(): Promise<void> {
  const chosen = PROFILES[process.env.CHAOS_PROFILE ?? 'full'];
  if (!chosen) throw new Error(`CHAOS_PROFILE must be one of ${Object.keys(PROFILES).join(', ')}`);
  const profile = process.env.CHAOS_FAULT_SECONDS
    ? { ...chosen, faultSeconds: Number(process.env.CHAOS_FAULT_SECONDS) }
    : chosen;
  const seeds = process.env.CHAOS_SEED
    ? process.env.CHAOS_SEED.split(',').map((s) => Number(s.trim()))
    : Array.from({ length: Number(process.env.CHAOS_RUNS ?? 3) }, () => newSeed());
  if (seeds.some((s) => !Number.isSafeInteger(s) || s < 0))
    throw new Error('CHAOS_SEED must be non-negative integers');
  const outDir = path.join(__dirname, '../../.chaos');
  mkdirSync(outDir, { recursive: true });
  let failed = 0;
  for (const seed of seeds) {
    console.log(`[chaos] seed ${seed} (reproduce: CHAOS_SEED=${seed} make chaos)`);
    const report = await runChaos({ seed, profile, logDir: path.join(outDir, `${seed}-logs`) });
    writeFileSync(path.join(outDir, `${seed}.json`), `${JSON.stringify(report, null, 2)}\n`);
    console.log(renderReport(report));
    if (!report.passed) failed++;
  }
  console.log(`[chaos] ${seeds.length - failed}/${seeds.length} runs passed`);
  process.exit(failed > 0 ? 1 : 0);
}

main().catch((error) => {
  console.error(`[chaos] ${(error as Error).stack ?? error}`);
  process.exit(2);
});
