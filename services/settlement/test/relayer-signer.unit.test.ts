import type { ServiceContext } from '@paygate/runtime';
import type { SettlementDB } from '../src/db';
import type { RelayerChain } from '../src/relayer/chain';
import { RelayerSigner, SignerPool } from '../src/relayer/pool';
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

  it('answers the last reading of the last minute when the read that should replace it fails', async () => {
    const first = signer.balanceWei();
    reads[0]!.resolve(5n);
    await first;

    // A node slow under load: the read times out. The key's balance did not go anywhere; x402 stays offered.
    jest.advanceTimersByTime(30_000);
    const answer = signer.balanceWei();
    await expect(settled(answer)).resolves.toBe(pending);
    reads[1]!.reject(new Error('the chain RPC did not answer'));
    await expect(answer).resolves.toBe(5n);
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

/**
 * The pool's choice when every key that can pay is stuck: under load every key's receipts can come later than
 * RELAYER_STUCK_AFTER_MS, and the key whose queue really cannot move (a dropped transaction, a gap in its nonces)
 * has the fewest submissions, since it was skipped while the others were not stuck. A submission given to it would
 * wait behind the gap to its caller's deadline (relayer-pool.test.ts's stuck key: one of eight answered `submitted`).
 */
describe('SignerPool when every key is stuck', () => {
  const STUCK_AFTER_MS = 300;
  const settings = {
    dbSchema: 'settlement',
    chainId: 31337,
    stuckAfterMs: STUCK_AFTER_MS,
    minBalanceWei: 1n,
  } as RelayerSettings;
  const logger = { error: () => undefined } as unknown as ServiceContext<SettlementDB>['logger'];

  function signerAt(n: number): RelayerSigner {
    const chain = {
      address: `0x${n.toString(16).padStart(40, '0')}`,
      chainId: 31337,
      balanceWei: async () => 10n ** 18n,
    } as unknown as RelayerChain;
    return new RelayerSigner(
      {} as ServiceContext<SettlementDB>,
      chain,
      settings,
      {} as RecordedAuthorizations,
    );
  }

  /** A submission of this key recorded `agoMs` ago and still waiting for its receipt. */
  function waiting(signer: RelayerSigner, agoMs: number): void {
    signer.assign().recordedAt = Date.now() - agoMs;
  }

  it('gives the next submission to the key whose oldest transaction waited the least, not the least loaded', async () => {
    const [held, slow1, slow2] = [signerAt(1), signerAt(2), signerAt(3)];
    waiting(held, 20_000);
    for (const signer of [slow1, slow2]) {
      waiting(signer, 2 * STUCK_AFTER_MS);
      waiting(signer, STUCK_AFTER_MS);
    }
    const pool = new SignerPool([held, slow1, slow2], settings, logger);
    for (let i = 0; i < 3; i++) {
      expect([held, slow1, slow2].every((signer) => signer.stuck(Date.now()))).toBe(true);
      const assigned = await pool.assign();
      expect('signer' in assigned && assigned.signer).not.toBe(held);
    }
  });

  it('still gives it to the least loaded key while any key is not stuck', async () => {
    const [busy, idle] = [signerAt(4), signerAt(5)];
    waiting(busy, 10);
    waiting(busy, 10);
    const pool = new SignerPool([busy, idle], settings, logger);
    const assigned = await pool.assign();
    expect('signer' in assigned && assigned.signer).toBe(idle);
  });
});
