import { formatAddress, getTransferLogs, usdcAbi } from '@paygate/chain';
import type { DepositHoldingsReply, EventData } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import { eventOf, mine, minedReceipt, setAutomine, testWallets, waitFor } from '@paygate/testing';
import { Contract, HDNodeWallet, Mnemonic, Wallet } from 'ethers';
import { sql } from 'kysely';
import { useSettlementHarness } from './harness';
import { publishEvent } from './helpers';

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const ESCROW = testWallets.escrow.address;
/** The dev deposit key (settlement's default outside production): checkout hands out its children. */
const depositKeys = HDNodeWallet.fromMnemonic(
  Mnemonic.fromPhrase('test test test test test test test test test test test junk'),
  "m/44'/60'/1'/0",
);

/**
 * Session deposit addresses swept into escrow by settlement: the address's derived key signs an EIP-3009
 * authorization of its balance to escrow and the relayer submits it, so neither the buyer nor the address needs ETH;
 * exactly once (a crash between signing and mining sends nothing twice); dust below CHECKOUT_SWEEP_MIN_MICRO
 * waits and is still listed for reconciliation. Real anvil, TestUSDC, Postgres, NATS.
 */
describe('settlement sweeps session deposit addresses into escrow through the relayer', () => {
  const h = useSettlementHarness('depositsweep', {
    escrowFunds: null,
    buyerFunds: '100',
    overrides: {
      RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey,
      TRANSFER_POLL_INTERVAL_MS: '100',
      CHECKOUT_SWEEP_INTERVAL_MS: '200',
    },
  });
  let usdc: Contract;
  let nextIndex = 500;
  let block = 1_000;

  const balanceOf = async (address: string) => BigInt(await usdc.getFunction('balanceOf')(address));
  const newDeposit = () => {
    const index = nextIndex++;
    return { index, address: new Wallet(depositKeys.deriveChild(index).privateKey).address };
  };

  /** What checkout publishes when it gives a session the address. */
  const assign = (deposit: { index: number; address: string }) =>
    publishEvent(
      h.bus,
      eventOf('deposit.address_assigned', {
        sessionId: `cs_${deposit.index.toString(16).padStart(32, '0')}`,
        address: deposit.address,
        derivationIndex: deposit.index,
        chainId: h.chain.anvil.chainId,
        assignedAt: new Date().toISOString(),
        watchUntil: new Date(Date.now() + 86_400_000).toISOString(),
      }),
    );

  /** What the indexer reports once the buyer's transfer to `to` is mined. */
  const observe = async (txHash: string, to: string, amountMicro: bigint) => {
    block++;
    const observed: EventData<'transfer.observed'> = {
      chainId: h.chain.anvil.chainId,
      network: 'local',
      txHash,
      logIndex: 0,
      blockNumber: block,
      blockHash: `0x${block.toString(16).padStart(64, '0')}`,
      from: testWallets.buyer.address,
      to,
      token: formatAddress(h.chain.usdcAddress),
      amount: formatUsdc(amountMicro),
      confirmations: 1,
      observedAt: new Date().toISOString(),
    };
    await publishEvent(h.bus, eventOf('transfer.observed', observed));
  };

  /** A buyer pays the address on chain, and the indexer reports it. */
  const pay = async (to: string, amountMicro: bigint) => {
    const buyer = new Wallet(testWallets.buyer.privateKey, h.chain.anvil.provider);
    const tx = await (usdc.connect(buyer) as Contract).getFunction('transfer')(to, amountMicro);
    await minedReceipt(tx);
    await observe(tx.hash as string, to, amountMicro);
  };

  /** Every USDC transfer from `from` to escrow on chain: the ground truth for exactly once. */
  const sweepsOnChain = async (from: string) => {
    const head = await h.chain.anvil.provider.getBlockNumber();
    const logs = await getTransferLogs(h.chain.anvil.provider, {
      token: h.chain.usdcAddress,
      fromBlock: 0,
      toBlock: head,
      maxRangeBlocks: 10_000,
    });
    return logs.filter((l) => l.from === formatAddress(from) && l.to === formatAddress(ESCROW));
  };

  const holdings = async (): Promise<DepositHoldingsReply> => {
    const reply = await h.bus.nc.request(
      h.bus.rpcSubject('settlement.deposit_holdings'),
      encoder.encode(JSON.stringify({ limit: 100 })),
      { timeout: 10_000 },
    );
    return JSON.parse(decoder.decode(reply.data)) as DepositHoldingsReply;
  };

  beforeAll(() => {
    usdc = new Contract(h.chain.usdcAddress, usdcAbi, h.chain.anvil.provider);
  });

  it('sweeps what a session address received into escrow once; the address holds no ETH and the buyer pays no gas for it', async () => {
    const deposit = newDeposit();
    await assign(deposit);
    const escrowBefore = await balanceOf(ESCROW);
    await pay(deposit.address, 2_500_000n);
    await waitFor(async () => (await balanceOf(deposit.address)) === 0n, {
      message: 'deposit address swept',
      timeoutMs: 30_000,
    });
    expect(await balanceOf(ESCROW)).toBe(escrowBefore + 2_500_000n);
    expect(await h.chain.anvil.provider.getBalance(deposit.address)).toBe(0n);
    const swept = await sweepsOnChain(deposit.address);
    expect(swept.map((l) => l.amountMicro)).toEqual([2_500_000n]);
    // Seen empty after the sweep: off the list reconciliation reads.
    await waitFor(async () => !(await holdings()).addresses.includes(deposit.address), {
      message: 'swept address no longer held',
    });
    const sweeps = await h.db
      .selectFrom('deposit_sweeps')
      .selectAll()
      .where('address', '=', deposit.address.toLowerCase())
      .execute();
    expect(sweeps.map((s) => ({ status: s.status, amount: s.amount_micro }))).toEqual([
      { status: 'confirmed', amount: 2_500_000n },
    ]);
  });

  it('one sweeper per schema: a sweeper of another deployment in the same database does not hold this one back', async () => {
    const schema = h.env.schemaFor('settlement');
    const passWhileHeld = (lockName: string) =>
      h.db.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(hashtextextended(${lockName}, 0))`.execute(trx);
        return (await h.service!.depositSweeper.runPass()).leader;
      });
    // Another schema's sweeper, and the name every deployment shared before: both left this one without a pass.
    // (Asked until it leads: this service's own timed pass may hold the lock at that moment.)
    await waitFor(() => passWhileHeld('settlement-deposit-sweep:another_deployment'), {
      message: 'a pass led while another schema held its sweeper lock',
    });
    await waitFor(() => passWhileHeld('settlement-deposit-sweep'), {
      message: 'a pass led while the shared name was held',
    });
    // A replica of this deployment holding it: this pass is not the leader.
    expect(await passWhileHeld(`settlement-deposit-sweep:${schema}`)).toBe(false);
  });

  it('leaves dust below the threshold (no gas for it) but lists it for reconciliation; sweeps it all once more arrives', async () => {
    const deposit = newDeposit();
    await assign(deposit);
    await pay(deposit.address, 5_000n); // 0.005 USDC, below the default 0.01
    await waitFor(
      async () =>
        (
          await h.db
            .selectFrom('deposit_addresses')
            .select(['check_due_at', 'last_balance_micro'])
            .where('address', '=', deposit.address.toLowerCase())
            .executeTakeFirst()
        )?.last_balance_micro === 5_000n,
      { message: 'dust read', timeoutMs: 20_000 },
    );
    expect(await balanceOf(deposit.address)).toBe(5_000n);
    expect(await sweepsOnChain(deposit.address)).toHaveLength(0);
    expect((await holdings()).addresses).toContain(deposit.address);

    await pay(deposit.address, 20_000n);
    await waitFor(async () => (await balanceOf(deposit.address)) === 0n, {
      message: 'dust swept with the next payment',
      timeoutMs: 30_000,
    });
    expect((await sweepsOnChain(deposit.address)).map((l) => l.amountMicro)).toEqual([25_000n]);
  });

  it('a sweep signed and broadcast but not mined when settlement stops is not sent again by the next process', async () => {
    const deposit = newDeposit();
    await assign(deposit);
    await setAutomine(h.chain.anvil.provider, false);
    try {
      // The buyer's transfer must be mined to be observed: one block by hand.
      const buyer = new Wallet(testWallets.buyer.privateKey, h.chain.anvil.provider);
      const tx = await (usdc.connect(buyer) as Contract).getFunction('transfer')(deposit.address, 3_000_000n);
      await mine(h.chain.anvil.provider, 1);
      await minedReceipt(tx);
      await observe(tx.hash as string, deposit.address, 3_000_000n);
      // Signed, recorded and broadcast; not mined (automine is off).
      await waitFor(
        async () =>
          (
            await h.db
              .selectFrom('relayed_authorizations')
              .select('status')
              .where('payer', '=', deposit.address.toLowerCase())
              .executeTakeFirst()
          )?.status === 'broadcast',
        { message: 'sweep broadcast', timeoutMs: 30_000 },
      );
      await h.service!.stop();
      await h.start();
      // The new process finds the open sweep (a pass of its own has run) and signs nothing new: the relayer
      // holds the recorded transaction, which is then mined.
      await waitFor(async () => (await h.service!.depositSweeper.runPass()).leader, {
        message: 'a sweeper pass of the new process',
      });
      await mine(h.chain.anvil.provider, 2);
    } finally {
      await setAutomine(h.chain.anvil.provider, true);
    }
    await waitFor(
      async () =>
        (
          await h.db
            .selectFrom('deposit_sweeps')
            .select('status')
            .where('address', '=', deposit.address.toLowerCase())
            .executeTakeFirst()
        )?.status === 'confirmed',
      { message: 'sweep confirmed after the restart', timeoutMs: 30_000 },
    );
    await mine(h.chain.anvil.provider, 3);
    expect((await sweepsOnChain(deposit.address)).map((l) => l.amountMicro)).toEqual([3_000_000n]);
    expect(await balanceOf(deposit.address)).toBe(0n);
    expect(
      await h.db
        .selectFrom('relayed_authorizations')
        .select('id')
        .where('payer', '=', deposit.address.toLowerCase())
        .execute(),
    ).toHaveLength(1);
    expect(
      await h.db
        .selectFrom('deposit_sweeps')
        .select('sweep_id')
        .where('address', '=', deposit.address.toLowerCase())
        .execute(),
    ).toHaveLength(1);
  });

  it('a sweep recorded but never submitted (a crash right after signing) is submitted as recorded, once', async () => {
    const deposit = newDeposit();
    await assign(deposit);
    const buyer = new Wallet(testWallets.buyer.privateKey, h.chain.anvil.provider);
    await minedReceipt(
      await (usdc.connect(buyer) as Contract).getFunction('transfer')(deposit.address, 1_000_000n),
    );
    await waitFor(
      () =>
        h.db
          .selectFrom('deposit_addresses')
          .select('derivation_index')
          .where('address', '=', deposit.address.toLowerCase())
          .where('derivation_index', 'is not', null)
          .executeTakeFirst(),
      { message: 'assignment consumed' },
    );
    // What a process that died right after recording leaves behind (no transfer.observed: nothing else is due).
    const recorded = await h.service!.depositSweeper.record(
      deposit.address.toLowerCase(),
      deposit.index,
      1_000_000n,
    );
    expect(recorded?.status).toBe('open');
    await waitFor(async () => (await balanceOf(deposit.address)) === 0n, {
      message: 'recorded sweep submitted',
      timeoutMs: 30_000,
    });
    const relayed = await h.db
      .selectFrom('relayed_authorizations')
      .select(['auth_nonce', 'signature'])
      .where('payer', '=', deposit.address.toLowerCase())
      .execute();
    expect(relayed).toEqual([{ auth_nonce: recorded!.auth_nonce, signature: recorded!.signature }]);
    expect((await sweepsOnChain(deposit.address)).map((l) => l.amountMicro)).toEqual([1_000_000n]);
  });
});
