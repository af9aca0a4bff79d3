import http from 'node:http';
import { text } from 'node:stream/consumers';
import { sql } from 'kysely';
import { openSchema } from './infra';

/** The shared property test's parts (deploy/test/fuzz.test.ts): operations, hostile bodies, a sender, snapshots. */

export { baseAccepted, hostileBodies } from './fuzz-bodies';
export {
  HOSTILE_URL_VALUES,
  operationSeed,
  parameterisedReads,
  type ReadOperation,
  type WriteOperation,
  writeOperations,
} from './fuzz-operations';

export interface RouteFigures {
  route: string;
  /** Whether the mutated bodies start from one the documented schema accepts. */
  validBase: boolean;
  requests: number;
  byStatus: Record<string, number>;
  maxLatencyMs: number;
  totalLatencyMs: number;
}

export interface FuzzCall {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

const FUZZ_CALL_TIMEOUT_MS = 30_000;

/** One call on a kept-alive connection (status 0: no answer in time); not fetch, which took a fifth of the CPU. */
function sendCall(
  agent: http.Agent,
  call: FuzzCall,
): Promise<{ status: number; contentType: string | null; text: string }> {
  return new Promise((resolve) => {
    const failed = (error: unknown) => resolve({ status: 0, contentType: null, text: String(error) });
    let request: http.ClientRequest;
    try {
      request = http.request(
        call.url,
        { method: call.method, headers: call.headers, agent, timeout: FUZZ_CALL_TIMEOUT_MS },
        (response) =>
          text(response).then((body) => {
            const contentType = response.headers['content-type'] ?? null;
            resolve({ status: response.statusCode ?? 0, contentType, text: body });
          }, failed),
      );
    } catch (error) {
      // A header value Node refuses to send (the call never left).
      failed(error);
      return;
    }
    request.on('timeout', () => request.destroy(new Error(`no answer in ${FUZZ_CALL_TIMEOUT_MS} ms`)));
    request.on('error', failed);
    request.end(call.body);
  });
}

/** Sends the calls `concurrency` at a time, counts them in `figures`, and collects what `check` finds wrong. */
export async function sendConcurrently(
  calls: FuzzCall[],
  options: {
    concurrency: number;
    figures: RouteFigures;
    check: (call: FuzzCall, status: number, contentType: string | null, body: string) => string | undefined;
  },
): Promise<Array<{ call: FuzzCall; status: number; problem: string; body: string }>> {
  const problems: Array<{ call: FuzzCall; status: number; problem: string; body: string }> = [];
  let next = 0;
  const { figures } = options;
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency });
  try {
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        while (next < calls.length) {
          const call = calls[next++]!;
          const started = performance.now();
          const { status, contentType, text } = await sendCall(agent, call);
          const elapsed = performance.now() - started;
          figures.requests += 1;
          figures.byStatus[status] = (figures.byStatus[status] ?? 0) + 1;
          figures.maxLatencyMs = Math.max(figures.maxLatencyMs, elapsed);
          figures.totalLatencyMs += elapsed;
          const problem = status === 0 ? 'no answer' : options.check(call, status, contentType, text);
          if (problem) problems.push({ call, status, problem, body: text.slice(0, 300) });
        }
      }),
    );
  } finally {
    agent.destroy();
  }
  return problems;
}

/** The figures as a Markdown table (route, requests, answers by status, mean and max latency). */
export function figuresTable(rows: RouteFigures[]): string {
  const lines = [
    '| route | valid base | requests | answers by status | mean ms | max ms |',
    '|---|---|---:|---|---:|---:|',
    ...rows.map((row) => {
      const statuses = Object.entries(row.byStatus)
        .sort(([a], [b]) => Number(a) - Number(b))
        .map(([status, count]) => `${status}×${count}`)
        .join(' ');
      const mean = row.requests ? row.totalLatencyMs / row.requests : 0;
      return `| ${row.route} | ${row.validBase ? 'yes' : 'no'} | ${row.requests} | ${statuses} | ${mean.toFixed(1)} | ${row.maxLatencyMs.toFixed(0)} |`;
    }),
  ];
  return lines.join('\n');
}

/** Every row of the schemas' tables as sorted JSON lines per table, less skipped tables and volatile columns. */
export async function snapshotRows(
  schemas: string[],
  options: { skipTables?: RegExp; volatileColumns?: Set<string> } = {},
): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  const replacer = (key: string, value: unknown) =>
    options.volatileColumns?.has(key) ? undefined : typeof value === 'bigint' ? String(value) : value;
  for (const schema of schemas) {
    const db = openSchema<unknown>(schema);
    try {
      const tables = await sql<{ table_name: string }>`
        select table_name from information_schema.tables
        where table_schema = ${schema} and table_type = 'BASE TABLE'`.execute(db);
      for (const { table_name: table } of tables.rows) {
        if (options.skipTables?.test(table)) continue;
        const { rows } = await sql<Record<string, unknown>>`select * from ${sql.table(table)}`.execute(db);
        out[`${schema}.${table}`] = rows.map((row) => JSON.stringify(row, replacer)).sort();
      }
    } finally {
      await db.destroy();
    }
  }
  return out;
}

/** Rows of `before` that are no longer exactly in `after` (new rows are not changes). */
export function changedRows(before: Record<string, string[]>, after: Record<string, string[]>): string[] {
  const changed: string[] = [];
  for (const [table, rows] of Object.entries(before)) {
    const remaining = new Map<string, number>();
    for (const row of after[table] ?? []) remaining.set(row, (remaining.get(row) ?? 0) + 1);
    for (const row of rows) {
      const count = remaining.get(row) ?? 0;
      if (count === 0) changed.push(`${table}: ${row.slice(0, 300)}`);
      else remaining.set(row, count - 1);
    }
  }
  return changed;
}
