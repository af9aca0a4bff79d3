/**
 * `BENCH_INSTRUCTIONS=<dir>`: the servers under test run under valgrind's callgrind, and each case with a server
 * reports the instructions that server executed per request. Unlike req/s or CPU seconds, an instruction count does
 * not move with what else the shared 2-core host is doing, so two revisions can be compared to about 1% (req/s
 * pairs on this host cannot tell apart differences under about 10%, A/A runs included).
 *
 * How: callgrind counts from the process's start; before each measured batch the count is zeroed
 * (`callgrind_control --zero`), after it dumped (`--dump`), and the dump's `totals:` line is the batch's instructions,
 * every thread of the process included (V8's compiler and GC threads too). The first batches run while V8 still
 * compiles the hot path, so the figure is the median of the batches after a warm-up. Only this process's own
 * instructions: the upstream's, the client's and the kernel's work on its sockets are not in it.
 *
 * This file is the harness only; it is also added to the baseline revision by bench/gateway/*.patch, so both
 * sides are measured by the same code.
 *
 * What it resolves (docs/benchmarks.md, "Instruction counts"): the same bare proxy on both sides agreed to
 * 0.3–0.5% in two runs; the gateway's batches of 4,000 spread ±5% (±15% with the 4 MB young generation, when a whole
 * full collection fell in some batches and not others), and its medians moved 2.5–4% between runs, the same way on
 * both sides: compare sides run at once, and read the medians.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Where callgrind writes its dumps, or undefined when instructions are not measured. */
export const CALLGRIND_DIR = process.env.BENCH_INSTRUCTIONS
  ? path.resolve(process.env.BENCH_INSTRUCTIONS)
  : undefined;

/** Under valgrind a process runs 20–50 times slower: its start and its first answers get this much longer. */
export const SLOWDOWN = CALLGRIND_DIR ? 20 : 1;

/**
 * Requests per measured batch, and unmeasured requests first: under valgrind V8 still moved hot functions up its
 * tiers after 2,000 requests (the gateway's batches of 1,000 went 883k, 688k, 581k instructions a request), and a
 * batch of 1,500 holding a full garbage collection counted 1.6 times one without.
 */
const BATCH_REQUESTS = Number(process.env.BENCH_INSTRUCTIONS_BATCH ?? 4000);
const MEASURED_BATCHES = 5;
const WARM_UP_REQUESTS = Number(process.env.BENCH_INSTRUCTIONS_WARM_UP ?? 8000);

/** V8's largest semi-space on 64-bit, which a server under load reaches within its first second of requests. */
const SEMI_SPACE_MB = 16;

/** `node <args>` as a command line, wrapped in callgrind when instructions are measured. */
export function nodeCommand(args: string[]): [string, string[]] {
  if (!CALLGRIND_DIR) return [process.execPath, args];
  mkdirSync(CALLGRIND_DIR, { recursive: true });
  return [
    'valgrind',
    [
      '--tool=callgrind',
      // V8 writes machine code and rewrites it: valgrind must check for code it has already translated being changed.
      '--smc-check=all-non-file',
      `--callgrind-out-file=${path.join(CALLGRIND_DIR, 'callgrind.%p')}`,
      process.execPath,
      // V8's background compiler and GC threads in a fixed order, and no heap shrinking on idle: the count repeats.
      '--single-threaded',
      '--no-memory-reducer',
      // The young generation at the size V8 grows it to in a loaded server (16 MB semi-spaces on 64-bit, measured:
      // 33.6 MB of new space), from the start. --predictable-gc-schedule would pin it at 4 MB, a quarter: scavenges
      // come four times as often, more objects reach the old generation, and the full collections marking it are
      // counted as the server's cost, though at the real size neither side runs more than two in a whole bench run
      // (docs/benchmarks.md, "Instruction counts").
      `--min-semi-space-size=${SEMI_SPACE_MB}`,
      `--max-semi-space-size=${SEMI_SPACE_MB}`,
      ...args,
    ],
  ];
}

async function control(pid: number, command: '--zero' | '--dump'): Promise<void> {
  await run('callgrind_control', [command, String(pid)], { timeout: 60_000 });
}

/** The newest dump of this process: callgrind names them callgrind.<pid>.<n>. */
function latestDumpTotal(pid: number): number {
  const prefix = `callgrind.${pid}.`;
  const dumps = readdirSync(CALLGRIND_DIR!)
    .filter((name) => name.startsWith(prefix))
    .map((name) => path.join(CALLGRIND_DIR!, name))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  if (dumps.length === 0) throw new Error(`no callgrind dump of process ${pid} in ${CALLGRIND_DIR}`);
  const totals = /^totals:\s+(\d+)/m.exec(readFileSync(dumps[0]!, 'utf8'));
  if (!totals) throw new Error(`${dumps[0]} has no totals line`);
  return Number(totals[1]);
}

/** Instructions counted from a zeroed count to the dump after `work` ends, and the milliseconds it took. */
async function counted(
  pid: number,
  work: () => Promise<void>,
): Promise<{ instructions: number; ms: number }> {
  await control(pid, '--zero');
  const started = performance.now();
  await work();
  const ms = performance.now() - started;
  await control(pid, '--dump');
  return { instructions: latestDumpTotal(pid), ms };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round((sorted[(sorted.length - 1) >> 1]! + sorted[sorted.length >> 1]!) / 2);
};

/**
 * Instructions `pid` executes per request while `send(n)` sends n requests and waits for their answers: the median
 * over the measured batches, with every batch's figure. What the process runs on its own meanwhile (timers:
 * rate-limit flushes, relays' idle passes) is in it; a try at subtracting it, from 15 idle seconds, did not repeat.
 */
export async function instructionsPerRequest(
  pid: number,
  send: (requests: number) => Promise<void>,
): Promise<{ median: number; batches: number[] }> {
  await send(WARM_UP_REQUESTS);
  const batches: number[] = [];
  for (let i = 0; i < MEASURED_BATCHES; i++) {
    const batch = await counted(pid, () => send(BATCH_REQUESTS));
    batches.push(Math.round(batch.instructions / BATCH_REQUESTS));
  }
  return { median: median(batches), batches };
}
