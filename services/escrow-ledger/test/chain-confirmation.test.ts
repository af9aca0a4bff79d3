/**
 * Found by make chaos (seeds 1873821474, 332867436): x402 books a relayed transfer from
 * payment.confirmed once it is included, before CONFIRMATIONS; a reorg that dropped it left the ledger above the
 * chain for good (the indexer never saw it, so no transfer.reorged came). Real anvil, Postgres and NATS: the
 * ledger holds such a payment back until the chain confirms it, reverses it when its transaction is gone
 * CONFIRMATIONS blocks later, and books it again when the same transaction is mined again elsewhere.
 */
import { usdcAbi } from '@paygate/chain';
import type { EventData } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import {
  type AnvilInstance,
  deployTestUsdc,
  fundTestWallets,
  mine,
  minedReceipt,
  reorg,
  rpcError,
  setAutomine,
  startAnvil,
  startRpcProxy,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract, Transaction } from 'ethers';
import { sql } from 'kysely';
import { accountBalance } from '../src/ledger/entries';
import { type LedgerHarness, paymentData, randomTxHash, startLedgerHarness } from './helpers';

/**
 * A JSON-RPC endpoint in front of a node that answers an error to every call naming a transaction in `unanswered`
 * (a node that answers nothing about them), and forwards the rest.
 */
async function startRpcSilentOn(upstreamUrl: string) {
  const unanswered = new Set<string>();
  const proxy = await startRpcProxy({
    upstream: upstreamUrl,
    answer: (call) => {
      const named = call.params?.[0];
      const silent = typeof named === 'string' && unanswered.has(named.toLowerCase());
      return silent ? rpcError(call, -32000, 'unavailable') : undefined;
    },
  });
  return { ...proxy, unanswered };
}

describe('payments booked before CONFIRMATIONS: confirmed by the chain, or reversed when a reorg dropped them', () => {
  let anvil: AnvilInstance;
  let usdcAddress: string;
  let h: LedgerHarness;
  let rpc: Awaited<ReturnType<typeof startRpcSilentOn>>;
  /** Far below the transfers the last test leaves unanswered, so that a pass cannot read them all. */
  const CHECK_BATCH_SIZE = 10;
  const escrow = testWallets.escrow.address;

  beforeAll(async () => {
    anvil = await startAnvil();
    usdcAddress = (await deployTestUsdc(anvil.rpcUrl)).address;
    await fundTestWallets({
      rpcUrl: anvil.rpcUrl,
      usdcAddress,
      amountMicro: 50_000_000n,
      roles: ['buyer', 'seller'],
    });
    rpc = await startRpcSilentOn(anvil.rpcUrl);
    h = await startLedgerHarness('chainconf', {
      CHAIN_RPC_URL: rpc.url,
      USDC_ADDRESS: usdcAddress,
      CONFIRMATIONS: '2',
      CHAIN_CONFIRM_TIMEOUT_MS: '600000',
      // Passes are run by the test, one at a time (the loop's own first pass finds nothing yet).
      CHAIN_CHECK_INTERVAL_MS: '600000',
      CHAIN_CHECK_BATCH_SIZE: String(CHECK_BATCH_SIZE),
    });
  });

  afterAll(async () => {
    await h?.stop();
    await rpc?.close();
    await anvil?.stop();
  });

  const usdcOf = (role: 'buyer' | 'seller') =>
    new Contract(usdcAddress, usdcAbi, testSigner(role, anvil.provider));
  const escrowOnChain = async () =>
    BigInt(await new Contract(usdcAddress, usdcAbi, anvil.provider).getFunction('balanceOf')(escrow));
  const escrowInLedger = () => accountBalance(h.ledger.ctx.db, 'escrow_asset');

  /** The buyer pays escrow on chain (mined at once) and the payment is booked from payment.confirmed. */
  async function payIncluded(amountMicro: bigint) {
    const tx = await usdcOf('buyer').getFunction('transfer')(escrow, amountMicro);
    const receipt = await minedReceipt(tx);
    const log = receipt.logs.find(
      (l: { address: string }) => l.address.toLowerCase() === usdcAddress.toLowerCase(),
    );
    const payment: EventData<'payment.confirmed'> = paymentData(h.sellerId, {
      payer: testWallets.buyer.address,
      token: usdcAddress,
      txHash: tx.hash.toLowerCase(),
      logIndex: log!.index,
      amount: formatUsdc(amountMicro),
      holdPeriodHours: 0,
    });
    await h.publish('payment.confirmed', payment);
    const txn = await waitFor(() => transactionOf(payment.paymentId), { message: 'payment not booked' });
    return {
      payment,
      txn,
      raw: Transaction.from((await anvil.provider.getTransaction(tx.hash))!).serialized,
    };
  }

  async function transactionOf(paymentId: string, live = true) {
    const rows = await sql<{
      id: string;
      escrow_status: string;
      reversal_reason: string | null;
      log_index: number;
    }>`select id, escrow_status, reversal_reason, log_index from transactions where payment_id = ${paymentId}
        ${live ? sql`and escrow_status <> 'reversed'` : sql``} order by created_at`.execute(h.ledger.ctx.db);
    return live ? rows.rows[0] : rows.rows;
  }
  const statusOf = async (transactionId: string) =>
    (
      await sql<{
        escrow_status: string;
        reversal_reason: string | null;
      }>`select escrow_status, reversal_reason from transactions where id = ${transactionId}`.execute(
        h.ledger.ctx.db,
      )
    ).rows[0]!;
  // A pass of the release loop itself: a confirmation kicks one, which holds the hold it releases locked meanwhile.
  const release = () => h.ledger.scheduler.passSoon();
  const check = async (txHash: string, logIndex: number) =>
    (await h.ledger.chainCheck.runOnce()).get(`31337:${txHash}:${logIndex}`);

  it('held back until the receipt is CONFIRMATIONS deep, then released', async () => {
    const { payment, txn } = await payIncluded(2_000_000n);
    if (!txn || Array.isArray(txn)) throw new Error('unreachable');
    await release();
    expect((await statusOf(txn.id)).escrow_status).toBe('held'); // a 0 h hold, but not confirmed by the chain
    expect(await check(payment.txHash, payment.logIndex)).toBe('waiting');
    await mine(anvil.provider, 1);
    expect(await check(payment.txHash, payment.logIndex)).toBe('confirmed');
    await release();
    expect((await statusOf(txn.id)).escrow_status).toBe('available');
    expect(await escrowInLedger()).toBe(await escrowOnChain());
  });

  it('not confirmed within CHAIN_CONFIRM_TIMEOUT_MS: still held (never paid on an unreachable chain), and reported', async () => {
    const overdue = async () => (await h.ledger.deps.metrics.unconfirmedOverdue.get()).values[0]?.value;
    const { payment, txn } = await payIncluded(1_000_000n);
    if (!txn || Array.isArray(txn)) throw new Error('unreachable');
    h.clock.advanceHours(1); // the timeout is 10 minutes; the receipt is one block deep of the two required
    expect(await check(payment.txHash, payment.logIndex)).toBe('waiting');
    expect(await overdue()).toBe(1);
    await release();
    expect((await statusOf(txn.id)).escrow_status).toBe('held');
    await mine(anvil.provider, 1);
    expect(await check(payment.txHash, payment.logIndex)).toBe('confirmed');
    await release();
    expect((await statusOf(txn.id)).escrow_status).toBe('available');
    await h.ledger.chainCheck.runOnce();
    expect(await overdue()).toBe(0);
    expect(await escrowInLedger()).toBe(await escrowOnChain());
  });

  it('dropped by a reorg: reversed CONFIRMATIONS blocks after it was first missed, never released; mined again elsewhere: booked again', async () => {
    const heldBefore = await accountBalance(h.ledger.ctx.db, 'seller_held', h.sellerId);
    const { payment, txn, raw } = await payIncluded(3_000_000n);
    if (!txn || Array.isArray(txn)) throw new Error('unreachable');
    await reorg(anvil.provider, 1);
    expect(await anvil.provider.getTransactionReceipt(payment.txHash)).toBeNull();
    expect(await escrowInLedger()).toBe((await escrowOnChain()) + 3_000_000n); // the defect's state

    expect(await check(payment.txHash, payment.logIndex)).toBe('missing');
    await release();
    expect((await statusOf(txn.id)).escrow_status).toBe('held'); // never payable
    await mine(anvil.provider, 1);
    expect(await check(payment.txHash, payment.logIndex)).toBe('missing'); // one block: a reorg may bring it back
    await mine(anvil.provider, 1);
    expect(await check(payment.txHash, payment.logIndex)).toBe('reversed');
    expect(await statusOf(txn.id)).toEqual({ escrow_status: 'reversed', reversal_reason: 'not_on_chain' });
    expect(await escrowInLedger()).toBe(await escrowOnChain());
    expect(await accountBalance(h.ledger.ctx.db, 'seller_held', h.sellerId)).toBe(heldBefore);
    expect(await check(payment.txHash, payment.logIndex)).toBeUndefined(); // no longer awaiting

    // The same signed transaction is mined again (the relayer resends the same bytes), now second in its block,
    // so its Transfer has another log index; the indexer reports it after CONFIRMATIONS.
    await setAutomine(anvil.provider, false);
    try {
      // Higher fees than the resent transaction: the node orders it first in the block.
      await usdcOf('seller').getFunction('transfer')(testWallets.stranger.address, 1n, {
        maxPriorityFeePerGas: 50_000_000_000n,
        maxFeePerGas: 100_000_000_000n,
      });
      await anvil.provider.send('eth_sendRawTransaction', [raw]);
      await mine(anvil.provider, 1);
    } finally {
      await setAutomine(anvil.provider, true);
    }
    const again = await anvil.provider.getTransactionReceipt(payment.txHash);
    const movedLog = again!.logs.find((l) => l.address.toLowerCase() === usdcAddress.toLowerCase())!;
    expect(movedLog.index).not.toBe(payment.logIndex);
    await mine(anvil.provider, 1);
    await h.publish('transfer.observed', {
      chainId: 31337,
      network: 'local',
      txHash: payment.txHash,
      logIndex: movedLog.index,
      blockNumber: again!.blockNumber,
      blockHash: again!.blockHash,
      from: testWallets.buyer.address,
      to: escrow,
      token: usdcAddress,
      amount: payment.amount,
      confirmations: 2,
      observedAt: new Date().toISOString(),
    });
    const rebooked = await waitFor(() => transactionOf(payment.paymentId), {
      message: 'the payment was not booked again on the re-mined transfer',
    });
    if (!rebooked || Array.isArray(rebooked)) throw new Error('unreachable');
    expect(rebooked).toMatchObject({ escrow_status: 'held', log_index: movedLog.index });
    expect(rebooked.id).not.toBe(txn.id);
    expect(await escrowInLedger()).toBe(await escrowOnChain());
    expect(await accountBalance(h.ledger.ctx.db, 'seller_held', h.sellerId)).toBe(heldBefore + 2_850_000n);
    // Observed by the indexer: confirmed, so released on its (0 h) hold.
    await release();
    expect((await statusOf(rebooked.id)).escrow_status).toBe('available');
  });

  // make chaos, seed 1482062104: a payment partly refunded on chain, then dropped by a reorg; the reversal took
  // only the unrefunded part out of escrow_asset, so the ledger stayed above the chain by the refund (-0.001).
  it('dropped after a refund was sent: the whole transfer reversed out of escrow, the seller owes the refund', async () => {
    const { payment, txn } = await payIncluded(4_000_000n);
    if (!txn || Array.isArray(txn)) throw new Error('unreachable');
    const availableBefore = await accountBalance(h.ledger.ctx.db, 'seller_available', h.sellerId);
    const refunded = await h.http('/api/v1/refunds', {
      body: { transactionId: txn.id, amount: '1', reason: 'partial' },
    });
    expect(refunded.status).toBe(201);
    const refundId = (
      await sql<{ id: string }>`select id from refunds where transaction_id = ${txn.id}`.execute(
        h.ledger.ctx.db,
      )
    ).rows[0]!.id;
    // Settlement sends the refund out of escrow (a block after the payment's) and the ledger books it sent.
    const refundTx = await new Contract(
      usdcAddress,
      usdcAbi,
      testSigner('escrow', anvil.provider),
    ).getFunction('transfer')(testWallets.buyer.address, 1_000_000n);
    await minedReceipt(refundTx);
    const refundRaw = Transaction.from((await anvil.provider.getTransaction(refundTx.hash))!).serialized;
    await h.publish('refund.completed', {
      event: 'refund.completed',
      refundId,
      transactionId: txn.id,
      sellerId: h.sellerId,
      refundTxHash: refundTx.hash,
      amount: '1',
      completedAt: new Date().toISOString(),
    });
    await waitFor(
      async () =>
        (
          await sql<{ status: string }>`select status from refunds where id = ${refundId}`.execute(
            h.ledger.ctx.db,
          )
        ).rows[0]?.status === 'completed',
      { message: 'refund not booked as sent' },
    );
    expect(await escrowInLedger()).toBe(await escrowOnChain());

    // A reorg drops both; settlement sends its refund again (the same bytes), the payment is not sent again.
    await reorg(anvil.provider, 2);
    expect(await anvil.provider.getTransactionReceipt(payment.txHash)).toBeNull();
    await anvil.provider.send('eth_sendRawTransaction', [refundRaw]);
    // Automine answers the send before the block holding it is readable: wait for the receipt.
    const resent = await waitFor(() => anvil.provider.getTransactionReceipt(refundTx.hash), {
      message: 'the resent refund was not mined',
    });
    expect(resent.status).toBe(1);

    expect(await check(payment.txHash, payment.logIndex)).toBe('missing');
    await mine(anvil.provider, 2);
    expect(await check(payment.txHash, payment.logIndex)).toBe('reversed');
    expect(await statusOf(txn.id)).toEqual({ escrow_status: 'reversed', reversal_reason: 'not_on_chain' });
    expect(await escrowInLedger()).toBe(await escrowOnChain());
    expect(await accountBalance(h.ledger.ctx.db, 'seller_available', h.sellerId)).toBe(
      availableBefore - 1_000_000n,
    );
  });

  // Each pass read the 100 oldest bookings first: 100 transfers the node never answered about were read again every
  // pass, and a newer payment was never checked, so never released. 100 stuck here: more than a pass reads, then
  // (a fixed 100) and now (CHAIN_CHECK_BATCH_SIZE).
  it('transfers the node never answers about do not keep a newer payment from being checked and released', async () => {
    const stuck = Array.from({ length: 100 }, () =>
      paymentData(h.sellerId, { token: usdcAddress, txHash: randomTxHash(), holdPeriodHours: 0 }),
    );
    for (const payment of stuck) {
      rpc.unanswered.add(payment.txHash);
      await h.publish('payment.confirmed', payment);
    }
    const stuckIds = await waitFor(
      async () => {
        const booked = await sql<{ id: string }>`select id from transactions
            where payment_id in (${sql.join(stuck.map((payment) => payment.paymentId))})`.execute(
          h.ledger.ctx.db,
        );
        return booked.rows.length === stuck.length && booked.rows.map((row) => row.id);
      },
      { message: 'stuck payments not booked' },
    );
    h.clock.advanceHours(1 / 60); // booked after all of them
    const { payment, txn } = await payIncluded(1_500_000n);
    if (!txn || Array.isArray(txn)) throw new Error('unreachable');
    await mine(anvil.provider, 1); // CONFIRMATIONS deep from its first check on
    const awaiting = (
      await sql<{ n: number }>`select count(*)::int as n from transfers
          where chain_confirmed_at is null and status = 'observed'`.execute(h.ledger.ctx.db)
    ).rows[0]!.n;
    expect(awaiting).toBe(stuck.length + 1);

    const outcomes = new Map<string, string>();
    for (let pass = 0; pass < Math.ceil(awaiting / CHECK_BATCH_SIZE); pass += 1) {
      for (const [key, outcome] of await h.ledger.chainCheck.runOnce()) outcomes.set(key, outcome);
    }
    expect(outcomes.get(`31337:${payment.txHash}:${payment.logIndex}`)).toBe('confirmed');
    // Every awaiting transfer checked within awaiting / CHECK_BATCH_SIZE passes; the stuck ones answered nothing.
    expect(outcomes.size).toBe(awaiting);
    expect([...outcomes.values()].filter((outcome) => outcome === 'unknown')).toHaveLength(stuck.length);
    await release();
    expect((await statusOf(txn.id)).escrow_status).toBe('available');
    for (const id of stuckIds) expect((await statusOf(id)).escrow_status).toBe('held'); // unconfirmed: held
  });
});
