import { testWallets } from '@paygate/testing';
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

  beforeAll(async () => {
    h = await startIndexerHarness('indexerdeposit', { CHECKOUT_ESCROW_ADDRESS: DEPOSIT });
  });

  afterAll(() => h?.stop());

  it('publishes transfers into either wallet with the receiving wallet, and not the sweep between them', async () => {
    const { hash: toEscrow } = await h.transfer(ESCROW, 1_000_000n);
    const { hash: toDeposit } = await h.transfer(DEPOSIT, 2_000_000n);
    const { hash: sweep } = await h.transfer(ESCROW, 2_000_000n, { from: 'checkoutEscrow' });
    const { hash: elsewhere } = await h.transfer(testWallets.stranger.address, 3_000_000n);
    const { hash: last } = await h.transfer(ESCROW, 4_000_000n, { from: 'stranger' });
    await h.observedTransfer(last);
    // Published in block order: the sweep and the transfer elsewhere, mined before the last one, were skipped.
    await h.caughtUp();
    const byTx = new Map((await h.events('transfer.observed')).map((e) => [e.data.txHash, e.data]));
    expect([...byTx.keys()].sort()).toEqual([toEscrow, toDeposit, last].sort());
    expect(byTx.get(toEscrow)).toMatchObject({ to: ESCROW, amount: '1' });
    expect(byTx.get(toDeposit)).toMatchObject({ to: DEPOSIT, amount: '2' });
    expect(byTx.has(sweep)).toBe(false);
    expect(byTx.has(elsewhere)).toBe(false);
    const stored = await sql<{ tx_hash: string }>`select tx_hash from transfers`.execute(h.db);
    expect(stored.rows.map((r) => r.tx_hash.toLowerCase())).not.toContain(sweep);
  });
});
