import { type HeadReads, HeadWatcher } from '../src/relayer/heads';

/**
 * The watcher's poll schedule on a simulated clock: a chain that makes a block every BLOCK_MS at a fixed phase and
 * answers each read after READ_MS. On a real node the moment a block exists moves with the host's load (a busy
 * 2-core host ticked anvil's miner hundreds of ms late), so how soon a block is noticed is measured here, where the
 * rhythm is exact; relayer-heads.test.ts runs the same watcher against anvil.
 */
const BLOCK_MS = 1000;
const PHASE_MS = 370;
const READ_MS = 2;

function simulatedChain() {
  const blockAt = (block: bigint) => PHASE_MS + Number(block) * BLOCK_MS;
  const headAt = (ms: number) => BigInt(Math.max(0, Math.floor((ms - PHASE_MS) / BLOCK_MS)));
  const chain = {
    reads: [] as number[],
    async blockNumber(): Promise<bigint> {
      chain.reads.push(performance.now());
      await new Promise((resolve) => setTimeout(resolve, READ_MS));
      return headAt(performance.now());
    },
    async blockTimestampSec(block: bigint): Promise<bigint> {
      await new Promise((resolve) => setTimeout(resolve, READ_MS));
      return BigInt(Math.floor(blockAt(block) / 1000));
    },
  };
  return { chain, blockAt };
}

/** A watcher polling `chain` every `pollMs`, past its first poll (which sees the head, not yet its rhythm). */
async function startedWatcher(chain: HeadReads, pollMs: number): Promise<HeadWatcher> {
  const watcher = new HeadWatcher(chain, pollMs);
  void watcher.newerThan(undefined, 5000);
  await jest.advanceTimersByTimeAsync(pollMs + READ_MS);
  return watcher;
}

/** How long after each of the next `blocks` blocks existed a caller waiting for it was woken. */
async function lagsOfNextBlocks(watcher: HeadWatcher, blockAt: (block: bigint) => number, blocks: number) {
  const lags: number[] = [];
  for (let i = 0; i < blocks; i++) {
    const head = watcher.known()!;
    let wokenAt: number | undefined;
    void watcher.newerThan(head, 5000).then(() => {
      wokenAt = performance.now();
    });
    for (let step = 0; step < 5000 && wokenAt === undefined; step++) await jest.advanceTimersByTimeAsync(1);
    const next = watcher.known()!;
    expect(next).toBe(head + 1n);
    lags.push(wokenAt! - blockAt(next));
  }
  return lags;
}

describe('relayer head watcher on a simulated clock', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: 0 });
    // A chain 40 blocks old, so its timestamps span INTERVAL_SPAN_BLOCKS.
    jest.setSystemTime(0);
    jest.advanceTimersByTime(40 * BLOCK_MS);
  });
  afterEach(() => jest.useRealTimers());

  it('learns the interval and phase, then notices each block within a few ms instead of half a poll later', async () => {
    const POLL_MS = 800;
    const { chain, blockAt } = simulatedChain();
    const watcher = await startedWatcher(chain, POLL_MS);
    const learning = await lagsOfNextBlocks(watcher, blockAt, 4);
    expect(watcher.learnedIntervalMs()).toBe(BLOCK_MS);
    const lags = await lagsOfNextBlocks(watcher, blockAt, 10);
    // Coarse polls alone notice a block POLL_MS / 2 late on average; so did the first blocks, while it learned.
    expect(Math.max(...learning)).toBeGreaterThan(50);
    // Each block narrows the moment down (the dense polls are an eighth of the last uncertainty), so after two
    // blocks each is noticed within a dense poll and a read.
    expect(Math.max(...lags.slice(2))).toBeLessThanOrEqual(2 * READ_MS + 3);
    watcher.stop();
  });

  it('polls densely only around the moment a block is due', async () => {
    const POLL_MS = 800;
    const { chain, blockAt } = simulatedChain();
    const watcher = await startedWatcher(chain, POLL_MS);
    await lagsOfNextBlocks(watcher, blockAt, 6);
    chain.reads.length = 0;
    const from = performance.now();
    await lagsOfNextBlocks(watcher, blockAt, 5);
    const elapsedMs = performance.now() - from;
    // Dense polls every few ms through a window of about 30 ms per block, and one coarse read between: far fewer
    // reads than polling every few ms all the time, and every read but one per block near a block's moment.
    expect(chain.reads.length).toBeLessThan(elapsedMs / 3 / 10);
    const nearBlock = chain.reads.filter((at) => {
      const intoBlock = (((at - PHASE_MS) % BLOCK_MS) + BLOCK_MS) % BLOCK_MS;
      return intoBlock < 40 || intoBlock > BLOCK_MS - 40;
    });
    expect(chain.reads.length - nearBlock.length).toBeLessThanOrEqual(5 * 2);
    watcher.stop();
  });

  it('a block that comes late is still noticed by the coarse poll', async () => {
    const POLL_MS = 200;
    let delayedFrom: bigint | undefined;
    const { chain, blockAt } = simulatedChain();
    const lateChain = {
      ...chain,
      async blockNumber() {
        const head = await chain.blockNumber();
        // From block `delayedFrom` on, every block comes 300 ms after its due moment.
        if (delayedFrom !== undefined && head >= delayedFrom) {
          return performance.now() - blockAt(head) >= 300 ? head : head - 1n;
        }
        return head;
      },
    };
    const watcher = await startedWatcher(lateChain, POLL_MS);
    await lagsOfNextBlocks(watcher, blockAt, 4);
    delayedFrom = watcher.known()! + 1n;
    const lags = await lagsOfNextBlocks(watcher, (block) => blockAt(block) + 300, 1);
    expect(lags[0]).toBeLessThanOrEqual(POLL_MS + READ_MS);
    watcher.stop();
  });
});
