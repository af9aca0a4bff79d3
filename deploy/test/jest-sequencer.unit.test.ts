/**
 * The order jest.sequencer.js gives a clean clone's run (no jest cache): longest first by jest.timings.json, a
 * suite the file does not know estimated from its size, a suite that failed last time first.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.join(__dirname, '../..');
const Sequencer = require('../../jest.sequencer.js');
const {
  slotAwareOrder,
  startsWholeSystem,
  wholeSystemSlot,
  WORKERS,
  WHOLE_SYSTEM_SLOTS,
} = require('../../jest.workers.js');
const timings: Record<string, number> = require('../../jest.timings.json').seconds;

interface FakeTest {
  path: string;
  context: {
    config: { cache: boolean; cacheDirectory: string; id: string };
    hasteFS: { getSize(file: string): number };
  };
}

const cacheDirectory = mkdtempSync(path.join(os.tmpdir(), 'paygate-sequencer-'));
afterAll(() => rmSync(cacheDirectory, { recursive: true, force: true }));

function testsFor(files: string[]): FakeTest[] {
  const context = {
    config: { cache: false, cacheDirectory, id: 'sequencer-test' },
    hasteFS: { getSize: () => 0 },
  };
  return files.map((file) => ({ path: path.isAbsolute(file) ? file : path.join(ROOT, file), context }));
}

const relative = (tests: FakeTest[]) => tests.map((t) => path.relative(ROOT, t.path));

describe('jest.sequencer.js', () => {
  it('runs the suites longest first by the committed times, whatever their file size', () => {
    const known = Object.entries(timings)
      .sort(([, a], [, b]) => b - a)
      .map(([file]) => file);
    expect(known.length).toBeGreaterThan(20);
    // The file's order reversed in, longest first out, dealt so that no more whole-system suites start together
    // than have slots.
    const shuffled = [...known].reverse();
    const dealt = slotAwareOrder(
      testsFor(known),
      (test: FakeTest) => timings[path.relative(ROOT, test.path)]!,
    );
    expect(relative(new Sequencer().sort(testsFor(shuffled)))).toEqual(relative(dealt));
    // The gateway's MCP abuse suite is one of the longest but a small file: it no longer starts near the end.
    const mcpAbuse = 'services/gateway-proxy/test/mcp-abuse.test.ts';
    const ordered = relative(
      new Sequencer().sort(testsFor(['deploy/test/readme-tree.unit.test.ts', mcpAbuse])),
    );
    expect(ordered[0]).toBe(mcpAbuse);
  });

  it('estimates a suite the file does not know from its size, at the known suites’ median seconds per byte', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'paygate-sequencer-suites-'));
    try {
      const big = path.join(dir, 'big.test.ts');
      const tiny = path.join(dir, 'tiny.test.ts');
      writeFileSync(big, 'x'.repeat(2_000_000));
      writeFileSync(tiny, 'x');
      const longest = Object.entries(timings).sort(([, a], [, b]) => b - a)[0]![0];
      const order = relative(new Sequencer().sort(testsFor([tiny, longest, big])));
      expect(order).toEqual([path.relative(ROOT, big), longest, path.relative(ROOT, tiny)]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('puts a suite that failed in the last run first', () => {
    const sequencer = new Sequencer();
    const tests = testsFor(['deploy/test/readme-tree.unit.test.ts', 'deploy/test/dashboard.browser.test.ts']);
    sequencer.hasFailed = (test: FakeTest) => test.path.endsWith('readme-tree.unit.test.ts');
    expect(relative(sequencer.sort(tests))[0]).toBe('deploy/test/readme-tree.unit.test.ts');
  });

  it('deals the longest suites first, but never more whole-system suites at once than slots', () => {
    const known = Object.entries(timings).map(([file]) => file);
    const seconds = (test: FakeTest) => timings[path.relative(ROOT, test.path)]!;
    const order: FakeTest[] = slotAwareOrder(testsFor(known), seconds);
    expect(order).toHaveLength(known.length);
    // Replay the schedule: each worker that frees up takes the next suite in the order.
    const running: { end: number; heavy: boolean }[] = [];
    let now = 0;
    for (const test of order) {
      if (running.length === WORKERS) {
        running.sort((a, b) => a.end - b.end);
        now = running.shift()!.end;
      }
      running.push({ end: now + seconds(test), heavy: startsWholeSystem(test.path) });
      expect(running.filter((suite) => suite.heavy).length).toBeLessThanOrEqual(WHOLE_SYSTEM_SLOTS);
    }
    expect(relative(order.slice(0, 2)).every((file) => file.startsWith('deploy/test/'))).toBe(true);
  });

  it('lets WHOLE_SYSTEM_SLOTS whole-system suites hold a slot at once; the next waits for a release', async () => {
    // Slots of its own: the run's are held by the whole-system suites running beside this one.
    const slots = mkdtempSync(path.join(os.tmpdir(), 'paygate-slots-'));
    const suite = path.join(ROOT, 'deploy/test/system.test.ts');
    const held = [];
    for (let i = 0; i < WHOLE_SYSTEM_SLOTS; i++) held.push(await wholeSystemSlot(suite, slots));
    let third: (() => void) | undefined;
    const waiting = wholeSystemSlot(suite, slots).then((release: () => void) => {
      third = release;
    });
    // A package suite never waits.
    (await wholeSystemSlot(path.join(ROOT, 'libs/money/test/usdc.unit.test.ts'), slots))();
    expect(third).toBeUndefined();
    held.pop()!();
    await waiting;
    expect(third).toBeDefined();
    third!();
    for (const release of held) release();
    rmSync(slots, { recursive: true, force: true });
  });
});
