import { usdcAbi } from '@paygate/chain';
import {
  countStreamMessages,
  minedReceipt,
  type TestWalletRole,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract, Wallet } from 'ethers';
import { sql } from 'kysely';
import { type IndexerHarness, startIndexerHarness } from './harness';

const ESCROW = testWallets.escrow.address;
const DEPOSIT = testWallets.checkoutEscrow.address;

/**
 * The checkout deposit wallet is watched beside the agent escrow: each transfer.observed names the wallet that
 * received it, and a move between the two (settlement's sweep) is not money arriving, so it is not published.
 */
describe('chain-indexer with a checkout deposit wallet', () => {
  let h: IndexerHarness;

  const send = async (from: TestWalletRole, to: string, amountMicro: bigint) => {
    const usdc = new Contract(
      h.usdcAddress,
      usdcAbi,
      new Wallet(testWallets[from].privateKey, h.anvil.provider),
    );
    const tx = await usdc.getFunction('transfer')(to, amountMicro);
    await minedReceipt(tx);
    return (tx.hash as string).toLowerCase();
  };

  beforeAll(async () => {
    h = await startIndexerHarness('indexerdeposit', { CHECKOUT_ESCROW_ADDRESS: DEPOSIT });
  });

  afterAll(() => h?.stop());

  it('publishes transfers into either wallet with the receiving wallet, and not the sweep between them', async () => {
    const toEscrow = await send('buyer', ESCROW, 1_000_000n);
    const toDeposit = await send('buyer', DEPOSIT, 2_000_000n);
    const sweep = await send('checkoutEscrow', ESCROW, 2_000_000n);
    const elsewhere = await send('buyer', testWallets.stranger.address, 3_000_000n);
    const last = await send('stranger', ESCROW, 4_000_000n);
    const bus = await h.env.bus();
    const events = await waitFor(
      async () => {
        const all = await countStreamMessages(bus, 'transfer.observed');
        return all.some((e) => (e.data as any).txHash === last) ? all : undefined;
      },
      { message: 'the last transfer published' },
    );
    // Published in block order: the sweep and the transfer elsewhere, mined before the last one, were skipped.
    await waitFor(
      async () =>
        (
          await sql<{ n: number }>`select count(*)::int n from outbox where published_at is null`.execute(
            h.db,
          )
        ).rows[0]!.n === 0,
      { message: 'outbox relayed' },
    );
    const byTx = new Map(events.map((e) => [(e.data as any).txHash as string, e.data as any]));
    expect([...byTx.keys()].sort()).toEqual([toEscrow, toDeposit, last].sort());
    expect(byTx.get(toEscrow)).toMatchObject({ to: ESCROW, amount: '1' });
    expect(byTx.get(toDeposit)).toMatchObject({ to: DEPOSIT, amount: '2' });
    expect(byTx.has(sweep)).toBe(false);
    expect(byTx.has(elsewhere)).toBe(false);
    const stored = await sql<{ tx_hash: string }>`select tx_hash from transfers`.execute(h.db);
    expect(stored.rows.map((r) => r.tx_hash.toLowerCase())).not.toContain(sweep);
  });
});
