/**
 * A side process's stdin (deploy/load/reference-process.ts, deploy/load/x402-process.ts): its setup as the first
 * JSON line, then, once the load process has every side process ready, the start line with the moment the load
 * ends. So a side process that is slow to load its modules on a busy host does not eat into its payers' time.
 */
import { createInterface } from 'node:readline';

export interface StartLine {
  /** When the load ends (epoch ms): each payer finishes what it has in flight. */
  endsAt: number;
}

export function sideInput<Setup>(): { setup: Promise<Setup>; start: Promise<StartLine> } {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const next = async <T>(what: string): Promise<T> => {
    const line = await lines.next();
    if (line.done) throw new Error(`stdin ended before the ${what} line`);
    return JSON.parse(line.value) as T;
  };
  const setup = next<Setup>('setup');
  const start = setup.then(() => next<StartLine>('start'));
  return { setup, start };
}
