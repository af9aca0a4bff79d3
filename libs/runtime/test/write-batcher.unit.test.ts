import { WriteBatcher } from '../src';

interface Item {
  key: string;
  done(): void;
}

/** A batcher whose writes wait until the test releases them; every batch written is kept. */
function recordingBatcher(maxWrites: number, maxPerWrite: number) {
  const batches: string[][] = [];
  const releases: Array<() => void> = [];
  let running = 0;
  let mostRunning = 0;
  const batcher = new WriteBatcher<Item>({
    maxWrites,
    maxPerWrite,
    fits: (batch, item) => !batch.some((other) => other.key === item.key),
    write: async (batch) => {
      batches.push(batch.map((item) => item.key));
      running += 1;
      mostRunning = Math.max(mostRunning, running);
      await new Promise<void>((resolve) => releases.push(resolve));
      running -= 1;
      for (const item of batch) item.done();
    },
  });
  const add = (key: string) => new Promise<void>((done) => batcher.add({ key, done }));
  const releaseAll = async () => {
    while (releases.length > 0) {
      releases.shift()!();
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  return { batches, add, releaseAll, mostRunning: () => mostRunning };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('WriteBatcher', () => {
  it('writes what arrived in one turn together, and a second item of one key in the next write', async () => {
    const b = recordingBatcher(2, 25);
    const all = Promise.all(['a', 'b', 'a', 'c'].map(b.add));
    await turn();
    expect(b.batches).toEqual([['a', 'b', 'c']]);
    await b.releaseAll();
    await turn();
    await b.releaseAll();
    await all;
    expect(b.batches).toEqual([['a', 'b', 'c'], ['a']]);
  });

  it('keeps to maxPerWrite items a write and maxWrites writes at once', async () => {
    const b = recordingBatcher(2, 2);
    const all = Promise.all(['a', 'b', 'c', 'd', 'e'].map(b.add));
    for (let i = 0; i < 20 && b.batches.flat().length < 5; i++) {
      await turn();
      await b.releaseAll();
    }
    await all;
    expect(b.batches.every((batch) => batch.length <= 2)).toBe(true);
    expect(b.batches.flat().sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(b.mostRunning()).toBeLessThanOrEqual(2);
  });
});
