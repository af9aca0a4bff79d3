/** The end of a run's faults: the system left alone until nothing is in flight (every outbox, inbox and job done). */
import pg from 'pg';
import { pendingWork } from './invariants';

export /** Waits until nothing is in flight for 2 s (pendingWork), up to `deadline`: when it became quiet, or null. */
async function drainUntilQuiet(
  databaseUrl: string,
  deadline: number,
  log: (line: string) => void,
): Promise<number | null> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    let quietSince: number | undefined;
    let lastShown = 0;
    while (Date.now() < deadline) {
      const pending = await pendingWork(client).catch(() => ({ unreachable: 1 }));
      const busy = Object.entries(pending).filter(([, n]) => n > 0);
      if (busy.length === 0) {
        quietSince ??= Date.now();
        // Quiet for 2 s: events in flight between an outbox and an inbox have landed too.
        if (Date.now() - quietSince > 2000) return quietSince;
      } else {
        quietSince = undefined;
        if (Date.now() - lastShown > 5000) {
          lastShown = Date.now();
          log(`draining: ${busy.map(([what, n]) => `${what} ${n}`).join(', ')}`);
        }
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    return null;
  } finally {
    await client.end().catch(() => undefined);
  }
}
