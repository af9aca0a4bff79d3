/**
 * How long a 0 h hold payment takes to become available (on a loaded machine a seller's share was still held 30 s
 * after its paid call). Between its booking and its release stand the chain check (its transfer must be
 * CONFIRMATIONS deep) and a release pass. Real anvil, Postgres and NATS: a confirmed transfer's hold is released by
 * the pass the confirmation kicks, not a release interval later; transfers in blocks not yet deep do not take the
 * turns of one that is; and the age of the oldest due hold is a gauge, by what it waits for.
 */
import { usdcAbi } from '@paygate/chain';
import type { EventData } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import {
  type AnvilInstance,
  deployTestUsdc,
  fundTestWallets,
  mine,
  setAutomine,
  startAnvil,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract } from 'ethers';
import { sql } from 'kysely';
import { type LedgerHarness, paymentData, startLedgerHarness } from './helpers';

describe('a 0 h hold payment becomes available within a bound once its transfer is confirmed', () => {
  let anvil: AnvilInstance;
  let usdcAddress: string;
  let h: LedgerHarness;
  const CHECK_BATCH_SIZE = 5;
  const escrow = testWallets.escrow.address;

  beforeAll(async () => {
    anvil = await startAnvil();
    usdcAddress = (await deployTestUsdc(anvil.rpcUrl)).address;
    await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress, amountMicro: 50_000_000n, roles: ['buyer'] });
    h = await startLedgerHarness('releasebound', {
      CHAIN_RPC_URL: anvil.rpcUrl,
      USDC_ADDRESS: usdcAddress,
      CONFIRMATIONS: '3',
      CHAIN_CONFIRM_TIMEOUT_MS: '600000',
      // Passes are the test's: a release pass comes only when something kicks it.
      RELEASE_INTERVAL_MS: '600000',
      CHAIN_CHECK_INTERVAL_MS: '600000',
      CHAIN_CHECK_BATCH_SIZE: String(CHECK_BATCH_SIZE),
    });
  });

  afterAll(async () => {
    await h?.stop();
    await anvil?.stop();
  });

  const usdc = () => new Contract(usdcAddress, usdcAbi, testSigner('buyer', anvil.provider));

  /** `count` payments to escrow mined together in one block, each booked as a 0 h hold payment. */
  async function payInOneBlock(
    count: number,
    amountMicro = 10_000n,
    options: { book?: boolean; on?: LedgerHarness } = {},
  ) {
    const on = options.on ?? h;
    await setAutomine(anvil.provider, false);
    const hashes: string[] = [];
    try {
      const signer = testSigner('buyer', anvil.provider);
      let nonce = await anvil.provider.getTransactionCount(signer.address, 'pending');
      for (let i = 0; i < count; i++) {
        const tx = await usdc().getFunction('transfer')(escrow, amountMicro, { nonce: nonce++ });
        hashes.push(tx.hash.toLowerCase());
      }
      await mine(anvil.provider, 1);
    } finally {
      await setAutomine(anvil.provider, true);
    }
    const payments: EventData<'payment.confirmed'>[] = [];
    for (const hash of hashes) {
      const receipt = (await anvil.provider.getTransactionReceipt(hash))!;
      const log = receipt.logs.find((l) => l.address.toLowerCase() === usdcAddress.toLowerCase())!;
      payments.push(
        paymentData(on.sellerId, {
          payer: testWallets.buyer.address,
          token: usdcAddress,
          txHash: hash,
          logIndex: log.index,
          amount: formatUsdc(amountMicro),
          holdPeriodHours: 0,
        }),
      );
    }
    return { payments, ids: options.book === false ? [] : await book(payments, on) };
  }

  /** Books the payments (their claims) and returns their transactions' ids, in the payments' order. */
  async function book(payments: EventData<'payment.confirmed'>[], on = h): Promise<string[]> {
    await Promise.all(payments.map((payment) => on.claim(payment)));
    return waitFor(
      async () => {
        const booked = await sql<{ id: string; payment_id: string }>`select id, payment_id from transactions
            where payment_id in (${sql.join(payments.map((p) => p.paymentId))})`.execute(on.ledger.ctx.db);
        if (booked.rows.length !== payments.length) return false;
        const ids = new Map(booked.rows.map((r) => [r.payment_id, r.id]));
        return payments.map((p) => ids.get(p.paymentId)!);
      },
      { message: 'payments not booked' },
    );
  }

  const statusOf = async (id: string) =>
    (
      await sql<{ escrow_status: string }>`select escrow_status from transactions where id = ${id}`.execute(
        h.ledger.ctx.db,
      )
    ).rows[0]!.escrow_status;
  const key = (p: EventData<'payment.confirmed'>) => `31337:${p.txHash}:${p.logIndex}`;
  const dueOldest = async (waiting: 'release' | 'chain') =>
    (await h.ledger.deps.metrics.holdsDueOldest.get()).values.find((v) => v.labels.waiting === waiting)
      ?.value;

  it('released by the pass its confirmation kicks, not a release interval later', async () => {
    const { payments, ids } = await payInOneBlock(1);
    await h.ledger.scheduler.tick();
    expect(await statusOf(ids[0]!)).toBe('held'); // a 0 h hold, its transfer not yet CONFIRMATIONS deep
    await mine(anvil.provider, 2);
    expect((await h.ledger.chainCheck.runOnce()).get(key(payments[0]!))).toBe('confirmed');
    // RELEASE_INTERVAL_MS is 10 minutes: only the kick of the confirming pass can release it in time.
    await waitFor(async () => (await statusOf(ids[0]!)) === 'available', {
      timeoutMs: 10_000,
      message: 'a confirmed 0 h hold was not released by the pass its confirmation kicked',
    });
  });

  it('the oldest due hold is a gauge, by what it waits for', async () => {
    const { payments, ids } = await payInOneBlock(1);
    h.clock.advanceHours(10 / 3600); // 10 s past its (0 h) hold period
    await h.ledger.scheduler.tick();
    expect(await statusOf(ids[0]!)).toBe('held');
    expect(await dueOldest('chain')).toBeCloseTo(10, 0); // due, its transfer not yet deep
    expect(await dueOldest('release')).toBe(0);
    await mine(anvil.provider, 2);
    expect((await h.ledger.chainCheck.runOnce()).get(key(payments[0]!))).toBe('confirmed');
    await waitFor(async () => (await statusOf(ids[0]!)) === 'available', { timeoutMs: 10_000 });
    await h.ledger.scheduler.tick();
    expect(await dueOldest('chain')).toBe(0);
    expect(await dueOldest('release')).toBe(0);
  });

  it('transfers in blocks not yet deep do not take the turns of one that is deep', async () => {
    // One payment mined, then more than a pass reads in the next block; the recent ones booked first, so in the
    // round of turns the older payment comes last.
    const old = await payInOneBlock(1, 10_000n, { book: false });
    const recent = await payInOneBlock(CHECK_BATCH_SIZE * 4);
    const oldIds = await book(old.payments);
    // Every transfer read once (each pass reads the least recently checked): none deep yet.
    const ours = new Set([...old.payments, ...recent.payments].map(key));
    const warmUp = new Map<string, string>();
    for (let pass = 0; pass < 5; pass++) {
      for (const [k, outcome] of await h.ledger.chainCheck.runOnce()) if (ours.has(k)) warmUp.set(k, outcome);
    }
    expect(warmUp.size).toBe(recent.payments.length + 1);
    expect(new Set(warmUp.values())).toEqual(new Set(['waiting']));
    // One more block: the older payment's block is CONFIRMATIONS deep, the recent ones' not yet. The next pass
    // reads it, not the recent ones ahead of it in the round (they can only answer "waiting").
    await mine(anvil.provider, 1);
    const next = await h.ledger.chainCheck.runOnce();
    expect(next.get(key(old.payments[0]!))).toBe('confirmed');
    await waitFor(async () => (await statusOf(oldIds[0]!)) === 'available', {
      timeoutMs: 10_000,
      message: 'the deep payment was not released',
    });
    for (const id of recent.ids) expect(await statusOf(id)).toBe('held');
    await mine(anvil.provider, 1);
    const outcomes = await h.ledger.chainCheck.runOnce();
    expect([...outcomes.values()]).toEqual(Array(CHECK_BATCH_SIZE).fill('confirmed'));
  });

  it('with the loops at their defaults, a burst of 0 h payments is available within the bound once CONFIRMATIONS deep', async () => {
    // CHAIN_CHECK_INTERVAL_MS 2 s, RELEASE_INTERVAL_MS 5 s, CHAIN_CHECK_BATCH_SIZE 100: production's.
    const live = await startLedgerHarness('releaseboundlive', {
      CHAIN_RPC_URL: anvil.rpcUrl,
      USDC_ADDRESS: usdcAddress,
      CONFIRMATIONS: '3',
      CHAIN_CONFIRM_TIMEOUT_MS: '600000',
      RELEASE_INTERVAL_MS: '5000',
    });
    try {
      const { ids } = await payInOneBlock(40, 10_000n, { on: live });
      await mine(anvil.provider, 2);
      const deepAt = Date.now();
      // The bound stated in the README: a check pass at most CHAIN_CHECK_INTERVAL_MS away (its backlog within one
      // batch), then its kick of the release; RELEASE_BOUND_MS is the alert line for the release.
      const { chainCheckIntervalMs, releaseBoundMs } = live.ledger.deps.config;
      const boundMs = chainCheckIntervalMs + releaseBoundMs;
      await waitFor(
        async () =>
          (
            await sql<{ n: number }>`select count(*)::int as n from transactions
              where id in (${sql.join(ids)}) and escrow_status = 'available'`.execute(live.ledger.ctx.db)
          ).rows[0]!.n === ids.length,
        {
          timeoutMs: boundMs,
          intervalMs: 100,
          message: `not every 0 h payment available within ${boundMs} ms`,
        },
      );
      expect(Date.now() - deepAt).toBeLessThanOrEqual(boundMs);
    } finally {
      await live.stop();
    }
  });
});
