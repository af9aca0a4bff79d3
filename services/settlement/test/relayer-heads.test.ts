import { type AnvilInstance, startAnvil, testWallets } from '@paygate/testing';
import { WebSocketProvider } from 'ethers';
import { loadRelayerConfig } from '../src/relayer/config';
import { HeadPush } from '../src/relayer/head-push';
import { HeadWatcher } from '../src/relayer/heads';

jest.setTimeout(60_000);

/** The relayer's chain reads, counted: how many eth_blockNumber calls the waiting callers cost. */
function countedChain(anvil: AnvilInstance) {
  const counted = {
    calls: 0,
    async blockNumber(): Promise<bigint> {
      counted.calls++;
      return BigInt(await anvil.provider.getBlockNumber());
    },
    async blockTimestampSec(block: bigint): Promise<bigint> {
      return BigInt((await anvil.provider.getBlock(block))!.timestamp);
    },
  };
  return counted;
}

/** When each head reached an independent WebSocket subscriber (the yardstick for "noticed late"). */
async function headArrivals(anvil: AnvilInstance) {
  const provider = new WebSocketProvider(anvil.rpcUrl.replace(/^http/, 'ws'));
  const arrivedAt = new Map<bigint, number>();
  const waiting = new Map<bigint, Array<(at: number) => void>>();
  await provider.on('block', (head: number) => {
    const block = BigInt(head);
    if (arrivedAt.has(block)) return;
    const at = performance.now();
    arrivedAt.set(block, at);
    for (const wake of waiting.get(block) ?? []) wake(at);
    waiting.delete(block);
  });
  /** When `block` reached this subscriber; waits for it (bounded) when the watcher heard of it first. */
  const arrivalOf = (block: bigint, timeoutMs: number): Promise<number | undefined> => {
    const known = arrivedAt.get(block);
    if (known !== undefined) return Promise.resolve(known);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(undefined), timeoutMs);
      waiting.set(block, [
        ...(waiting.get(block) ?? []),
        (at) => {
          clearTimeout(timer);
          resolve(at);
        },
      ]);
    });
  };
  return { arrivalOf, close: () => provider.destroy() };
}

/** Waits for the blocks after the current one, one at a time: how long after its arrival each was noticed. */
async function lagsOfNextBlocks(
  watcher: HeadWatcher,
  arrivals: Awaited<ReturnType<typeof headArrivals>>,
  blocks: number,
): Promise<number[]> {
  const lags: number[] = [];
  for (let i = 0; i < blocks; i++) {
    await watcher.newerThan(undefined, 5000);
    const head = watcher.known()!;
    await watcher.newerThan(head, 5000);
    const wokenAt = performance.now();
    const next = watcher.known()!;
    expect(next).toBeGreaterThan(head);
    // The watcher and the yardstick hear of a head over two sockets, in either order: woken first counts as no lag.
    const arrived = await arrivals.arrivalOf(next, 2000);
    if (arrived !== undefined) lags.push(Math.max(0, wokenAt - arrived));
  }
  return lags;
}

describe('relayer head watcher: waiting callers hear of a new block together, soon after it exists', () => {
  let anvil: AnvilInstance;
  let arrivals: Awaited<ReturnType<typeof headArrivals>>;

  beforeAll(async () => {
    anvil = await startAnvil({ fresh: true, blockTimeSec: 1 });
    // Every block stamped exactly a second after the last, whoever mines it: the interval the watcher reads is the
    // chain's 1 s whatever the load. From the wall clock, a late tick of the miner stamped a block 2 s after the last;
    // `anvil_mine` with an interval left the miner's next block stamped the same second as the last (seen in CI: 950).
    await anvil.provider.send('anvil_setBlockTimestampInterval', [1]);
    await anvil.provider.send('anvil_mine', ['0x20']);
    arrivals = await headArrivals(anvil);
  });

  afterAll(async () => {
    await arrivals?.close();
    await anvil?.stop();
  });

  it('ten callers waiting for the next block are woken by one poll, not ten', async () => {
    const POLL_MS = 50;
    const chain = countedChain(anvil);
    const watcher = new HeadWatcher(chain, POLL_MS);
    await watcher.newerThan(undefined, 5000);
    const head = watcher.known()!;
    const started = performance.now();
    const callsBefore = chain.calls;
    await Promise.all(Array.from({ length: 10 }, () => watcher.newerThan(head, 5000)));
    const waitedMs = performance.now() - started;
    expect(watcher.known()).toBe(head + 1n);
    // One caller alone polling every POLL_MS would have made about waitedMs / POLL_MS reads; ten, ten times that.
    expect(chain.calls - callsBefore).toBeLessThanOrEqual(Math.ceil(waitedMs / POLL_MS) + 2);
    watcher.stop();
  });

  it("learns the block interval from the chain's timestamps, and wakes the callers at each new block", async () => {
    // How soon a block is noticed once its phase is learned is tested on a simulated clock
    // (head-watcher.unit.test.ts): anvil's miner ticks late on a loaded host, which no bound here could tell from
    // the watcher's own lateness.
    const watcher = new HeadWatcher(countedChain(anvil), 800);
    await lagsOfNextBlocks(watcher, arrivals, 4);
    expect(watcher.learnedIntervalMs()).toBe(1000);
    await lagsOfNextBlocks(watcher, arrivals, 2);
    watcher.stop();
  });

  it('with RELAYER_WS_URL, a pushed head wakes the callers at once, whatever the poll interval', async () => {
    const watcher = new HeadWatcher(countedChain(anvil), 5000);
    const warnings: string[] = [];
    const push = new HeadPush(
      anvil.rpcUrl.replace(/^http/, 'ws'),
      anvil.chainId,
      (head) => watcher.pushed(head),
      { warn: (_fields, message) => warnings.push(message) },
    );
    push.start();
    try {
      await watcher.newerThan(undefined, 10_000);
      const lags = await lagsOfNextBlocks(watcher, arrivals, 3);
      expect(lags.length).toBeGreaterThanOrEqual(2);
      // A 5 s poll could not have seen these blocks within a second of each other (typically a few ms here; the
      // bound leaves room for a busy worker).
      expect(Math.max(...lags)).toBeLessThan(1000);
      expect(warnings).toEqual([]);
    } finally {
      await push.stop();
      watcher.stop();
    }
  });

  it('RELAYER_WS_URL must be a ws:// or wss:// URL', () => {
    const env = { RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey };
    expect(loadRelayerConfig(env, testWallets.escrow.privateKey)?.headsWsUrl).toBeUndefined();
    expect(
      loadRelayerConfig({ ...env, RELAYER_WS_URL: 'wss://node.example/ws' }, testWallets.escrow.privateKey)
        ?.headsWsUrl,
    ).toBe('wss://node.example/ws');
    expect(() =>
      loadRelayerConfig({ ...env, RELAYER_WS_URL: 'https://node.example' }, testWallets.escrow.privateKey),
    ).toThrow(/RELAYER_WS_URL: must be a ws:\/\/ or wss:\/\/ URL/);
  });
});
