import { usdcAbi } from '@paygate/chain';
import { mine, setAutomine, testWallets, waitFor } from '@paygate/testing';
import { Contract, HDNodeWallet, Mnemonic, Wallet } from 'ethers';
import { sql } from 'kysely';
import { type IndexerHarness, startIndexerHarness } from './harness';
import { startLogLimitProxy } from './log-limit-proxy';

const ESCROW = testWallets.escrow.address;
/** The dev deposit key (settlement's default outside production); checkout hands out its children. */
const depositKeys = HDNodeWallet.fromMnemonic(
  Mnemonic.fromPhrase('test test test test test test test test test test test junk'),
  "m/44'/60'/1'/0",
);

/**
 * Session deposit addresses: the indexer learns them from `deposit.address_assigned`,
 * reports transfers to them (also one paid before it heard of the address, and one paid while it was down), not
 * a transfer to an address nobody assigned, and not settlement's sweep of one into escrow (an internal move).
 */
describe('chain-indexer watches session deposit addresses', () => {
  let h: IndexerHarness;
  let index = 100;

  const pay = async (to: string, amountMicro: bigint, from?: Wallet) =>
    (await h.transfer(to, amountMicro, { from })).hash;
  const newDepositAddress = () => {
    const i = index++;
    return { index: i, key: new Wallet(depositKeys.deriveChild(i).privateKey) };
  };
  const assign = (deposit: { index: number; key: Wallet }, watchForMs?: number) =>
    h.assignDepositAddress(deposit.key.address, deposit.index, { watchForMs });
  const publishedHashes = async () => (await h.events('transfer.observed')).map((e) => e.data.txHash);

  beforeAll(async () => {
    // One recipient per eth_getLogs call, so the chunking is exercised.
    h = await startIndexerHarness('indexerdepositaddr', { ADDRESSES_PER_LOG_QUERY: '1' });
  });

  afterAll(() => h?.stop());

  it('reports transfers to assigned addresses, including one paid before the indexer heard of it, and skips the sweep', async () => {
    const early = newDepositAddress();
    const late = newDepositAddress();
    const stranger = newDepositAddress(); // derived but never assigned: not Paygate's to watch
    // Paid before its assignment reached the indexer (the buyer had the address first): found by the backfill.
    const earlyTx = await pay(early.key.address, 1_500_000n);
    await assign(early);
    await assign(late);
    await waitFor(
      async () => (await h.count(sql`select count(*)::int n from deposit_addresses where backfilled`)) >= 2,
      { message: 'addresses registered and backfilled' },
    );
    const lateTx = await pay(late.key.address, 2_000_000n);
    const strangerTx = await pay(stranger.key.address, 3_000_000n);
    expect(await h.observedTransfer(earlyTx)).toMatchObject({ to: early.key.address, amount: '1.5' });
    expect(await h.observedTransfer(lateTx)).toMatchObject({ to: late.key.address, amount: '2' });

    // Settlement's sweep of the early address into escrow (here a plain transfer; the deposit key pays its gas)
    // is a move between Paygate's own addresses: not money arriving.
    await h.anvil.provider.send('anvil_setBalance', [early.key.address, '0x16345785D8A0000']);
    const sweepTx = await pay(ESCROW, 1_500_000n, early.key);
    const marker = await pay(ESCROW, 4_000_000n);
    await h.observedTransfer(marker);
    const all = await publishedHashes();
    expect(all).not.toContain(sweepTx);
    expect(all).not.toContain(strangerTx);
  });

  it('after a restart, watches an address assigned while it was down and finds its payment', async () => {
    await h.stopIndexer();
    const whileDown = newDepositAddress();
    await assign(whileDown);
    const paidWhileDown = await pay(whileDown.key.address, 2_500_000n);
    await h.startIndexer();
    expect(await h.observedTransfer(paidWhileDown)).toMatchObject({
      to: whileDown.key.address,
      amount: '2.5',
    });
    const after = await pay(whileDown.key.address, 500_000n);
    expect(await h.observedTransfer(after)).toMatchObject({ to: whileDown.key.address, amount: '0.5' });
  });

  it('watches every address beyond MAX_WATCHED_DEPOSIT_ADDRESSES: the one whose watch ends first is still seen', async () => {
    // Free accounts can open sessions without bound; were the newest addresses watched and the rest dropped, a
    // flood of sessions would hide an older session's payment. Beyond the limit the indexer reads every transfer.
    await h.startIndexer({ MAX_WATCHED_DEPOSIT_ADDRESSES: '2' });
    const endsFirst = newDepositAddress();
    await assign(endsFirst, 3_600_000);
    const flood = [newDepositAddress(), newDepositAddress(), newDepositAddress()];
    for (const deposit of flood) await assign(deposit, 2 * 86_400_000);
    await waitFor(
      async () =>
        (await h.count(
          sql`select count(*)::int n from deposit_addresses where backfilled and watch_until > now()`,
        )) >
        2 + 1,
      { message: 'more addresses watched than the limit' },
    );
    const stranger = await pay(newDepositAddress().key.address, 700_000n);
    const paid = await pay(endsFirst.key.address, 1_250_000n);
    const flooded = await pay(flood[2]!.key.address, 250_000n);
    expect(await h.observedTransfer(paid)).toMatchObject({ to: endsFirst.key.address, amount: '1.25' });
    expect(await h.observedTransfer(flooded)).toMatchObject({ to: flood[2]!.key.address, amount: '0.25' });
    // The sweep into escrow is still an internal move, and a stranger's address still not watched.
    await h.anvil.provider.send('anvil_setBalance', [endsFirst.key.address, '0x16345785D8A0000']);
    const sweepTx = await pay(ESCROW, 1_250_000n, endsFirst.key);
    const marker = await pay(ESCROW, 4_500_000n);
    expect(await h.observedTransfer(marker)).toMatchObject({ to: ESCROW, amount: '4.5' });
    const all = await publishedHashes();
    expect(all).not.toContain(sweepTx);
    expect(all).not.toContain(stranger);
  });

  it('reads a block the node refuses whole in every-transfer mode by recipient: its payments are still seen', async () => {
    // On a busy chain one block can hold more USDC transfers than the node returns at once. A single block cannot
    // be halved into smaller ranges: read whole, the pass failed on it for good and every later payment went unseen.
    await h.stopIndexer();
    // The node also refuses more than one recipient per query in that block: the recipient batches are halved.
    const proxy = await startLogLimitProxy(h.anvil.rpcUrl, 1);
    try {
      await h.startIndexer({
        CHAIN_RPC_URL: proxy.url,
        MAX_WATCHED_DEPOSIT_ADDRESSES: '1',
        ADDRESSES_PER_LOG_QUERY: '4',
      });
      // Two watched addresses, beyond the limit of one: every-transfer mode.
      const deposit = newDepositAddress();
      const other = newDepositAddress();
      await assign(deposit);
      await assign(other);
      const addresses = [deposit, other].map((d) => d.key.address.toLowerCase());
      await waitFor(
        async () =>
          (await h.count(sql`select count(*)::int n from deposit_addresses
              where address in (${sql.join(addresses)}) and backfilled`)) === 2,
        { message: 'the addresses registered and backfilled' },
      );
      // A payment to the deposit address, one to escrow and a stranger's, all in the block the node refuses whole.
      const busyBlock = (await h.anvil.provider.getBlockNumber()) + 1;
      proxy.refuseBlock(busyBlock);
      const buyer = new Wallet(testWallets.buyer.privateKey, h.anvil.provider);
      const usdc = new Contract(h.usdcAddress, usdcAbi, buyer).getFunction('transfer');
      const nonce = await buyer.getNonce();
      const sent: Array<{ hash: string }> = [];
      await setAutomine(h.anvil.provider, false);
      try {
        sent.push(await usdc(deposit.key.address, 3_250_000n, { nonce }));
        sent.push(await usdc(ESCROW, 1_750_000n, { nonce: nonce + 1 }));
        sent.push(await usdc(newDepositAddress().key.address, 600_000n, { nonce: nonce + 2 }));
        await mine(h.anvil.provider, 1);
      } finally {
        await setAutomine(h.anvil.provider, true);
      }
      const receipts = await Promise.all(sent.map((tx) => h.anvil.provider.getTransactionReceipt(tx.hash)));
      expect(receipts.map((r) => r?.blockNumber)).toEqual([busyBlock, busyBlock, busyBlock]);
      const [paid, toEscrow, stranger] = sent.map((tx) => tx.hash.toLowerCase());
      expect(await h.observedTransfer(paid!)).toMatchObject({ to: deposit.key.address, amount: '3.25' });
      expect(await h.observedTransfer(toEscrow!)).toMatchObject({ to: ESCROW, amount: '1.75' });
      // The indexer moved past the block: a later payment is seen, and the stranger's transfer never was.
      const marker = await pay(ESCROW, 5_000_000n);
      expect(await h.observedTransfer(marker)).toMatchObject({ to: ESCROW, amount: '5' });
      const all = await publishedHashes();
      expect(all).not.toContain(stranger);
      expect(proxy.refusals()).toBeGreaterThan(0);
    } finally {
      await h.stopIndexer();
      await proxy.close();
    }
  });
});
