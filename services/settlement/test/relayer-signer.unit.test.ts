import type { ServiceContext } from '@paygate/runtime';
import type { SettlementDB } from '../src/db';
import type { RelayerChain } from '../src/relayer/chain';
import { RelayerSigner } from '../src/relayer/pool';
import type { RecordedAuthorizations } from '../src/relayer/recorded';
import type { RelayerSettings } from '../src/relayer/settings';

/**
 * A key's balance as submissions and `relayer.status` read it. A chain read that hangs must not hold them while a
 * recent reading is known: the gateway asks `relayer.status` with a 3 s timeout and offers no x402 for the next
 * 3 s when it hears nothing (a load run's payers got 402s without PAYMENT-REQUIRED hundreds of times).
 */
describe('RelayerSigner balance', () => {
  const address = '0x00000000000000000000000000000000000000aa';
  let reads: Array<{ resolve(wei: bigint): void; reject(error: Error): void }>;
  let signer: RelayerSigner;
  const pending = Symbol('pending');

  /** What the promise has settled to once the microtasks ran, or `pending`. */
  async function settled<T>(promise: Promise<T>): Promise<T | typeof pending> {
    return Promise.race([promise, new Promise<typeof pending>((r) => setImmediate(() => r(pending)))]);
  }

  beforeEach(() => {
    jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick'], now: 1_000_000 });
    reads = [];
    const chain = {
      address,
      chainId: 31337,
      balanceWei: () => new Promise<bigint>((resolve, reject) => reads.push({ resolve, reject })),
    } as unknown as RelayerChain;
    signer = new RelayerSigner(
      {} as ServiceContext<SettlementDB>,
      chain,
      { dbSchema: 'settlement', chainId: 31337 } as RelayerSettings,
      {} as RecordedAuthorizations,
    );
  });

  afterEach(() => jest.useRealTimers());

  it('answers a recent reading while the next read hangs, and takes the new one once it comes', async () => {
    const first = signer.balanceWei();
    reads[0]!.resolve(5n);
    await expect(first).resolves.toBe(5n);

    jest.advanceTimersByTime(3000);
    // The next read is under way and does not answer: the reading of 3 s ago does.
    await expect(settled(signer.balanceWei())).resolves.toBe(5n);
    expect(reads).toHaveLength(2);
    // One read at a time.
    await expect(settled(signer.balanceWei())).resolves.toBe(5n);
    expect(reads).toHaveLength(2);

    reads[1]!.resolve(7n);
    await settled(Promise.resolve());
    await expect(settled(signer.balanceWei())).resolves.toBe(7n);
  });

  it('waits for the read when the last reading is too old to stand for the balance', async () => {
    const first = signer.balanceWei();
    reads[0]!.resolve(5n);
    await first;

    jest.advanceTimersByTime(60_000);
    const answer = signer.balanceWei();
    await expect(settled(answer)).resolves.toBe(pending);
    reads[1]!.reject(new Error('the chain RPC did not answer'));
    await expect(answer).rejects.toThrow('did not answer');
  });
});
