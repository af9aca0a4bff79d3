/**
 * Checkout session creation: sessions per second and latency percentiles with an empty amount range, and
 * with 95% of the range taken. Real Postgres and NATS. The service runs in this process; the load comes from
 * autocannon in a child process (`run.ts load …`) so client and server do not share one event loop.
 * Writes bench/results/checkout.json and the checkout section of docs/benchmarks.md.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { sql } from 'kysely';
import { publishSkill, skillEvent, startHarness } from '../../services/checkout/test/helpers';

const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 8000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const WARMUP_MS = 1500;
const PRICES = 40; // each price has its own range; spreading load keeps the 95% phase near 95% throughout
const RANGE = 10_000;
const FILL = 0.95;

interface PhaseResult {
  name: string;
  requests: number;
  errors: number;
  sessionsPerSecond: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  rangeTakenAtStart: number;
  rangeTakenAtEnd: number;
  /** os.loadavg() (1, 5, 15 min) when the phase started and when it ended: the box is shared. */
  loadAverageAtStart: number[];
  loadAverageAtEnd: number[];
  /** CPU time of the service process (user + system) per created session, warm-up included. */
  serviceCpuMsPerSession: number;
}

interface LoadSpec {
  url: string;
  authorization: string;
  skills: string[];
  durationMs: number;
  connections: number;
}

interface LoadResult {
  requests: number;
  ok: number;
  errors: number;
  elapsedSeconds: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** Child process: autocannon against the service, bodies cycling over the skills (one price each). */
async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  let counter = 0;
  const options = (durationMs: number) => ({
    url: spec.url,
    connections: spec.connections,
    duration: durationMs / 1000,
    timeout: 10,
    requests: [
      {
        method: 'POST' as const,
        headers: { 'content-type': 'application/json', authorization: spec.authorization },
        // Like the widget: every click carries its own Idempotency-Key.
        setupRequest: (request: any) => ({
          ...request,
          headers: { ...request.headers, 'idempotency-key': `bench-${process.pid}-${counter}` },
          body: JSON.stringify({ skill: spec.skills[counter++ % spec.skills.length] }),
        }),
      },
    ],
  });
  await autocannon({ ...options(WARMUP_MS), connections: Math.min(4, spec.connections) });
  const started = Date.now();
  const result = await autocannon(options(spec.durationMs));
  const elapsedSeconds = (Date.now() - started) / 1000;
  const ok = result['2xx'];
  return {
    requests: result.requests.total,
    ok,
    errors: result.non2xx + result.errors + result.timeouts,
    elapsedSeconds,
    p50Ms: result.latency.p50,
    p90Ms: result.latency.p90,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
  };
}

function loadInChild(spec: LoadSpec): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', __filename, 'load'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`load process exited with ${code}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()!));
      } catch (error) {
        reject(error);
      }
    });
    child.stdin.end(JSON.stringify(spec));
  });
}

/** BENCH_PROFILE=dir: a CPU profile of the service process per phase (chrome://inspect, speedscope). */
async function startProfile(): Promise<((name: string) => Promise<void>) | undefined> {
  const dir = process.env.BENCH_PROFILE;
  if (!dir) return undefined;
  const { Session } = await import('node:inspector/promises');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return async (name) => {
    const { profile } = await session.post('Profiler.stop');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, `${name.replace(/\W+/g, '-')}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  };
}

const loadAverage = () => os.loadavg().map((v) => Number(v.toFixed(2)));

async function main() {
  const h = await startHarness('bench', { AMOUNT_SUFFIX_RANGE_MICRO: String(RANGE), LOG_LEVEL: 'warn' });
  try {
    const db = h.running.ctx.db;
    const skills = async (prefix: string, base: number) => {
      const names: string[] = [];
      for (let i = 0; i < PRICES; i++) {
        const name = `${prefix}-${i}`;
        await publishSkill(h, skillEvent(h, { name }, [String(base + i)]));
        names.push(name);
      }
      return names;
    };
    const emptySkills = await skills('empty', 100);
    const fullSkills = await skills('full', 500);
    // Take 95% of every "full" price's range with sessions that a transfer could still match.
    const taken = Math.floor((RANGE - 1) * FILL);
    for (let i = 0; i < PRICES; i++) {
      const priceMicro = BigInt(500 + i) * 1_000_000n;
      await sql`
        insert into sessions (session_id, seller_id, description, price_micro, exact_amount_micro, status,
          hold_period_hours, created_at, expires_at, late_until, amount_reserved, updated_at)
        select 'cs_fill' || ${i} || '_' || s, ${h.sellerId}, 'prefill', ${priceMicro}, ${priceMicro} + s, 'open', 0,
          now(), now() + interval '1 day', now() + interval '2 days', true, now()
        from (select s from generate_series(1, ${RANGE - 1}) s order by random() limit ${taken}) picked`.execute(
        db,
      );
    }
    // A live system's table is vacuumed; without this, autovacuum of the prefill would land inside a phase.
    await sql`vacuum analyze sessions`.execute(db);

    const occupancy = async (prices: number[]) => {
      const row = await sql<{ n: string }>`
        select count(*)::text as n from sessions where amount_reserved and price_micro = any(${prices.map((p) => BigInt(p) * 1_000_000n)})`.execute(
        db,
      );
      return Number(row.rows[0]!.n) / (prices.length * (RANGE - 1));
    };

    const url = new URL('/api/v1/checkout/sessions', h.url).toString();
    const created = async () =>
      Number(
        (
          await sql<{
            n: string;
          }>`select count(*)::text as n from sessions where description <> 'prefill'`.execute(db)
        ).rows[0]!.n,
      );
    async function phase(name: string, names: string[], basePrice: number): Promise<PhaseResult> {
      const prices = names.map((_, i) => basePrice + i);
      const before = await occupancy(prices);
      const loadAverageAtStart = loadAverage();
      const profiler = await startProfile();
      const cpuBefore = process.cpuUsage();
      const createdBefore = await created();
      const load = await loadInChild({
        url,
        authorization: `Bearer ${h.publishableKey}`,
        skills: names,
        durationMs: DURATION_MS,
        connections: CONCURRENCY,
      });
      const cpu = process.cpuUsage(cpuBefore);
      await profiler?.(name);
      const createdDuring = (await created()) - createdBefore;
      const result: PhaseResult = {
        name,
        requests: load.requests,
        errors: load.errors,
        sessionsPerSecond: Math.round(load.ok / load.elapsedSeconds),
        p50Ms: load.p50Ms,
        p90Ms: load.p90Ms,
        p99Ms: load.p99Ms,
        maxMs: load.maxMs,
        rangeTakenAtStart: Number(before.toFixed(4)),
        rangeTakenAtEnd: Number((await occupancy(prices)).toFixed(4)),
        loadAverageAtStart,
        loadAverageAtEnd: loadAverage(),
        serviceCpuMsPerSession: Number(
          ((cpu.user + cpu.system) / 1000 / Math.max(1, createdDuring)).toFixed(3),
        ),
      };
      console.log(JSON.stringify(result));
      return result;
    }

    const empty = await phase('empty range', emptySkills, 100);
    const full = await phase('95% of the range taken', fullSkills, 500);
    const report = {
      benchmark: 'checkout session creation (POST /api/v1/checkout/sessions, publishable key)',
      date: new Date().toISOString(),
      machine: { cpus: os.cpus().length, node: process.version, loadAverageAtEnd: loadAverage() },
      settings: {
        durationMs: DURATION_MS,
        concurrency: CONCURRENCY,
        prices: PRICES,
        amountSuffixRangeMicro: RANGE,
      },
      phases: [empty, full],
      targets: {
        sessionsPerSecondAtLeast: 1000,
        p99At95PercentAtMostTwiceEmpty: true,
        met: {
          throughput: empty.sessionsPerSecond >= 1000 && full.sessionsPerSecond >= 1000,
          p99Ratio: full.p99Ms <= 2 * empty.p99Ms,
        },
        p99Ratio: Number((full.p99Ms / empty.p99Ms).toFixed(2)),
      },
    };
    const root = path.join(__dirname, '../..');
    mkdirSync(path.join(root, 'bench/results'), { recursive: true });
    writeFileSync(path.join(root, 'bench/results/checkout.json'), `${JSON.stringify(report, null, 2)}\n`);
    writeDocsSection(root, report);
  } finally {
    await h.stop();
  }
}

function writeDocsSection(root: string, report: any) {
  const file = path.join(root, 'docs/benchmarks.md');
  mkdirSync(path.dirname(file), { recursive: true });
  const la = (values: number[]) => values.map((v) => v.toFixed(2)).join(' / ');
  const section = `<!-- checkout:start -->
## Checkout: session creation

\`bench/checkout/run.ts\` (\`make bench\`) creates sessions through \`POST /api/v1/checkout/sessions\` with a
publishable key and an Idempotency-Key per request, as the widget sends them (skill price from the projection,
unique amount allocated by the database, the idempotency record and the \`checkout.session_created\` event
written to the outbox). Load: autocannon in a child process,
${report.settings.concurrency} keep-alive connections for ${report.settings.durationMs / 1000} s per phase (after a 1.5 s warm-up), over
${report.settings.prices} prices with a suffix range of ${report.settings.amountSuffixRangeMicro} micro-USDC each. Real Postgres and NATS;
service, load, Postgres and NATS share one machine (${report.machine.cpus} CPUs, Node ${report.machine.node}) with other work,
so the load average is recorded. Run of ${report.date}. Raw figures: \`bench/results/checkout.json\`.

| phase | range taken (start → end) | sessions/s | p50 ms | p90 ms | p99 ms | max ms | errors | service CPU ms/session | load avg 1/5/15 min (start → end) |
|---|---|---|---|---|---|---|---|---|---|
${(report.phases as PhaseResult[])
  .map(
    (p) =>
      `| ${p.name} | ${(p.rangeTakenAtStart * 100).toFixed(1)}% → ${(p.rangeTakenAtEnd * 100).toFixed(1)}% | ${p.sessionsPerSecond} | ${p.p50Ms} | ${p.p90Ms} | ${p.p99Ms} | ${p.maxMs} | ${p.errors} | ${p.serviceCpuMsPerSession} | ${la(p.loadAverageAtStart)} → ${la(p.loadAverageAtEnd)} |`,
  )
  .join('\n')}

Targets: at least 1,000 sessions/s (${report.targets.met.throughput ? 'met' : 'not met on this machine'}); p99 at 95%
no worse than twice the empty p99 (ratio ${report.targets.p99Ratio}: ${report.targets.met.p99Ratio ? 'met' : 'not met'}).

What the create path costs: one SQL statement and no other round trip. The seller and skill projections
are read from an in-memory cache (dropped on this replica when it commits a newer \`seller.updated\` /
\`skill.updated\`, and at most \`PROJECTION_CACHE_TTL_MS\` = 2 s old for changes another replica consumed);
a publishable key needs no SellerAuth RPC; the request schema is compiled once. The statement is one CTE:
it allocates the amount (starting at a random suffix, taking the first one the partial unique index shows
free, so a nearly full range costs a few more index probes, not more round trips), inserts the session, the
idempotency record when there is one, and the outbox row, and commits on its own. No per-request logging.

Reading the figures: on this shared box the service's Node process needs about
${Math.min(...(report.phases as PhaseResult[]).map((p) => p.serviceCpuMsPerSession))}–${Math.max(...(report.phases as PhaseResult[]).map((p) => p.serviceCpuMsPerSession))} ms of CPU per session (HTTP parsing and response, body
validation, the statement, and the relay publishing the event to JetStream; a CPU profile, \`BENCH_PROFILE=<dir>\`,
shows the socket writes of the pg query and of the HTTP response as the largest single items), so one process
on one free core tops out near ${Math.round(1000 / Math.max(...(report.phases as PhaseResult[]).map((p) => p.serviceCpuMsPerSession)))}–${Math.round(1000 / Math.min(...(report.phases as PhaseResult[]).map((p) => p.serviceCpuMsPerSession)))} sessions/s, and with a load average of ${la(report.phases[0].loadAverageAtStart).split(' / ')[0]} on
${report.machine.cpus} cores it gets a fraction of one. Checkout holds no state in memory that replicas must share
(the amount is decided by Postgres, the cache is per replica), so 1,000 sessions/s calls for a few replicas
on free cores — not measured here, this box has none free. The p99 under a 95% full range stays close to the
empty one because allocation is a few more index probes inside the same statement.
<!-- checkout:end -->`;
  let text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n';
  const pattern = /<!-- checkout:start -->[\s\S]*<!-- checkout:end -->/;
  text = pattern.test(text) ? text.replace(pattern, section) : `${text.trimEnd()}\n\n${section}\n`;
  writeFileSync(file, text);
}

async function readStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  return text;
}

(process.argv[2] === 'load'
  ? readStdin().then(async (spec) => console.log(JSON.stringify(await runLoad(JSON.parse(spec)))))
  : main()
).then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
