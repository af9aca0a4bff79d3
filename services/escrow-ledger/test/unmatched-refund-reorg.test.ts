/**
 * Found by make chaos (full seed 1482062104: reconciliation −0.106 after a depth-3 dropping reorg): a transfer
 * that paid for nothing, refunded to its payer by an operator, then dropped by a reorg. The refund left escrow
 * (or will: a booked refund is sent), the money never arrived, and the reversal took nothing out of escrow_asset,
 * so the ledger stayed above the chain by the whole transfer. Real anvil, Postgres and NATS: the dropped amount
 * leaves escrow_asset against a receivable from the payer (shown as exposure, the conflict still recorded), once
 * under redelivery; when the same transfer is mined again the receivable settles from it and it is not
 * refundable again.
 */
import { randomBytes } from 'node:crypto';
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
  setAutomine,
  startAnvil,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract, Transaction } from 'ethers';
import { sql } from 'kysely';
import { accountBalance } from '../src/ledger/entries';
import { reconcile } from '../src/reconciliation/reconcile';
import { type LedgerHarness, paymentData, startLedgerHarness } from './helpers';

describe('an operator-refunded unmatched transfer dropped by a reorg', () => {
  let anvil: AnvilInstance;
  let usdcAddress: string;
  let h: LedgerHarness;
  const escrow = testWallets.escrow.address;
  const payer = testWallets.buyer.address.toLowerCase();

  beforeAll(async () => {
    anvil = await startAnvil();
    usdcAddress = (await deployTestUsdc(anvil.rpcUrl)).address;
    await fundTestWallets({
      rpcUrl: anvil.rpcUrl,
      usdcAddress,
      amountMicro: 50_000_000n,
      roles: ['buyer', 'seller'],
    });
    h = await startLedgerHarness('unmatchedreorg', {
      CHAIN_RPC_URL: anvil.rpcUrl,
      USDC_ADDRESS: usdcAddress,
      CONFIRMATIONS: '2',
    });
    // Escrow money that stays: earlier buyers' transfers, booked, deep enough that no reorg here drops them.
    await payEscrow(5_000_000n);
    await mine(anvil.provider, 3);
  });

  afterAll(async () => {
    await h?.stop();
    await anvil?.stop();
  });

  const db = () => h.ledger.ctx.db;
  const usdc = (role: 'buyer' | 'seller' | 'escrow') =>
    new Contract(usdcAddress, usdcAbi, testSigner(role, anvil.provider));
  const escrowOnChain = async () =>
    BigInt(await new Contract(usdcAddress, usdcAbi, anvil.provider).getFunction('balanceOf')(escrow));
  const escrowInLedger = () => accountBalance(db(), 'escrow_asset');
  const owedByPayer = () => accountBalance(db(), 'refund_receivable', payer);
  const handled = (eventId: string) =>
    waitFor(
      async () => (await sql`select 1 from inbox where event_id = ${eventId}`.execute(db())).rows.length > 0,
      { timeoutMs: 10_000, message: `event ${eventId} handled` },
    );
  const refundsOf = async (txHash: string) =>
    (await sql<any>`select * from refunds where tx_hash = ${txHash.toLowerCase()}`.execute(db())).rows;
  const conflictKinds = async (txHash: string) =>
    (
      await sql<{
        kind: string;
      }>`select kind from payment_conflicts where tx_hash = ${txHash.toLowerCase()} order by id`.execute(db())
    ).rows.map((r) => r.kind);

  async function expectBooksMatchTheChain(owedByPayers: bigint) {
    const onChain = await escrowOnChain();
    expect(await escrowInLedger()).toBe(onChain);
    const report = await reconcile(db(), h.ledger.deps.config, onChain);
    expect(report.differences).toEqual([]);
    expect(report.exposure).toMatchObject({ owedByPayers: formatUsdc(owedByPayers) });
  }

  /** The indexer's transfer.observed for a mined buyer → escrow transfer, handled. */
  async function observe(txHash: string) {
    const receipt = (await anvil.provider.getTransactionReceipt(txHash))!;
    const log = receipt.logs.find((l) => l.address.toLowerCase() === usdcAddress.toLowerCase())!;
    const observed: EventData<'transfer.observed'> = {
      chainId: 31337,
      network: 'local',
      txHash: txHash.toLowerCase(),
      logIndex: log.index,
      blockNumber: receipt.blockNumber,
      blockHash: receipt.blockHash,
      from: testWallets.buyer.address,
      to: escrow,
      token: usdcAddress,
      amount: formatUsdc(BigInt(log.data)),
      confirmations: 2,
      observedAt: new Date().toISOString(),
    };
    await handled(await h.publish('transfer.observed', observed));
    return observed;
  }

  /** The buyer sends escrow USDC that pays for nothing (mined at once); the indexer reports it. */
  async function payEscrow(amountMicro: bigint) {
    const tx = await usdc('buyer').getFunction('transfer')(escrow, amountMicro);
    await minedReceipt(tx);
    const raw = Transaction.from((await anvil.provider.getTransaction(tx.hash))!).serialized;
    return { observed: await observe(tx.hash), raw };
  }

  const refundRequest = (
    observed: EventData<'transfer.observed'>,
  ): EventData<'transfer.refund_requested'> => ({
    refundRequestId: `trr_${randomBytes(12).toString('hex')}`,
    transferId: `tr_${randomBytes(12).toString('hex')}`,
    chainId: observed.chainId,
    txHash: observed.txHash,
    logIndex: observed.logIndex,
    from: observed.from,
    amount: observed.amount,
    reason: 'no order found',
    requestedAt: new Date().toISOString(),
  });

  /** The operator refunds the transfer: booked out of suspense, to be sent by settlement. */
  async function requestRefund(observed: EventData<'transfer.observed'>) {
    await h.publish('transfer.refund_requested', refundRequest(observed));
    return waitFor(async () => (await refundsOf(observed.txHash))[0] as { id: string } | undefined, {
      message: 'refund not booked',
    });
  }

  /** Settlement sends the refund from escrow (mined at once) and reports it sent. */
  async function sendRefund(refundId: string, amountMicro: bigint) {
    const tx = await usdc('escrow').getFunction('transfer')(testWallets.buyer.address, amountMicro);
    await minedReceipt(tx);
    const raw = Transaction.from((await anvil.provider.getTransaction(tx.hash))!).serialized;
    await handled(
      await h.publish('refund.completed', {
        event: 'refund.completed',
        refundId,
        kind: 'unmatched_transfer',
        transactionId: null,
        sellerId: null,
        refundTxHash: tx.hash,
        amount: formatUsdc(amountMicro),
        completedAt: new Date().toISOString(),
      }),
    );
    return { hash: tx.hash as string, raw };
  }

  /** The indexer's transfer.reorged for the block the transfer was observed in. */
  function reorged(observed: EventData<'transfer.observed'>): EventData<'transfer.reorged'> {
    const { confirmations: _c, observedAt: _o, ...transfer } = observed;
    return { ...transfer, reorgedAt: new Date().toISOString() };
  }

  async function resend(raw: string, hash: string) {
    await anvil.provider.send('eth_sendRawTransaction', [raw]);
    // Automine answers the send before the block holding it is readable: wait for the receipt.
    const receipt = await waitFor(() => anvil.provider.getTransactionReceipt(hash), {
      message: `${hash} not mined again`,
    });
    expect(receipt.status).toBe(1);
    return receipt;
  }

  /** The transaction mined again second in its block (a higher-fee one first): another log index; reported. */
  async function mineAgainElsewhere(raw: string, observed: EventData<'transfer.observed'>) {
    await setAutomine(anvil.provider, false);
    try {
      await usdc('seller').getFunction('transfer')(testWallets.stranger.address, 1n, {
        maxPriorityFeePerGas: 50_000_000_000n,
        maxFeePerGas: 100_000_000_000n,
      });
      await anvil.provider.send('eth_sendRawTransaction', [raw]);
      await mine(anvil.provider, 1);
    } finally {
      await setAutomine(anvil.provider, true);
    }
    await mine(anvil.provider, 1);
    const moved = await observe(observed.txHash);
    expect(moved.logIndex).not.toBe(observed.logIndex);
    return moved;
  }

  it('refund sent, then the transfer dropped: out of escrow against the payer; mined again: the receivable settles', async () => {
    await expectBooksMatchTheChain(0n);
    const suspense0 = await accountBalance(db(), 'suspense');
    const { observed, raw } = await payEscrow(2_500_000n);
    const refund = await requestRefund(observed);
    const refundTx = await sendRefund(refund.id, 2_500_000n);
    await expectBooksMatchTheChain(0n);

    // A reorg drops the transfer and the refund; settlement sends its refund again (the same bytes).
    await reorg(anvil.provider, 2);
    expect(await anvil.provider.getTransactionReceipt(observed.txHash)).toBeNull();
    await resend(refundTx.raw, refundTx.hash);
    const reorgEvent = await h.publish('transfer.reorged', reorged(observed));
    await handled(reorgEvent);

    // Before the fix: the ledger held the dropped 2.5 (escrow_asset 5.0 against 2.5 on chain).
    await expectBooksMatchTheChain(2_500_000n);
    expect(await owedByPayer()).toBe(2_500_000n);
    expect(await accountBalance(db(), 'suspense')).toBe(suspense0);
    expect(await conflictKinds(observed.txHash)).toEqual(['reorg_after_refund']);

    // Delivered again (at least once): the same event (the inbox skips it), and the same reorg published again as
    // another event (the handler finds the transfer reorged): nothing more is booked.
    await h.publish('transfer.reorged', reorged(observed), { id: reorgEvent, msgId: `${reorgEvent}-again` });
    await handled(await h.publish('transfer.reorged', reorged(observed)));
    await expectBooksMatchTheChain(2_500_000n);
    expect(await conflictKinds(observed.txHash)).toEqual(['reorg_after_refund']);

    // The same transaction mined again (alone in its block: the same log index): booked again as a new
    // inclusion, and it pays the payer's debt; it was refunded, so it is not refundable, nor can it pay.
    const again = await resend(raw, observed.txHash);
    await mine(anvil.provider, 1);
    const reincluded = await observe(observed.txHash);
    expect(reincluded.logIndex).toBe(observed.logIndex);
    expect(reincluded.blockHash).not.toBe(observed.blockHash);
    expect(again.blockHash).toBe(reincluded.blockHash);
    await expectBooksMatchTheChain(0n);
    expect(await owedByPayer()).toBe(0n);
    expect(await accountBalance(db(), 'suspense')).toBe(suspense0);
    await handled(await h.publish('transfer.observed', reincluded)); // redelivered: nothing more
    await handled(await h.publish('transfer.refund_requested', refundRequest(reincluded)));
    expect(await refundsOf(observed.txHash)).toHaveLength(1);
    const late = paymentData(h.sellerId, { txHash: observed.txHash, amount: '2.5', payer });
    // Refunded (here without an operator_refund claim, which would refuse it): the payment's claim books
    // nothing, credits nothing, and the books tell an operator.
    const refused = await h.claim(late);
    expect(refused).toMatchObject({ ok: true, paymentId: late.paymentId });
    expect(refused).not.toHaveProperty('transactionId');
    expect(await conflictKinds(observed.txHash)).toEqual(['reorg_after_refund', 'transfer_refunded']);
    await expectBooksMatchTheChain(0n);

    // Dropped once more: its payer owes the refund again.
    await reorg(anvil.provider, 2);
    expect(await anvil.provider.getTransactionReceipt(observed.txHash)).toBeNull();
    await handled(await h.publish('transfer.reorged', reorged(reincluded)));
    await expectBooksMatchTheChain(2_500_000n);
    // Mined again, settled again (the rest of this suite starts from books that match).
    await resend(raw, observed.txHash);
    await mine(anvil.provider, 1);
    await observe(observed.txHash);
    await expectBooksMatchTheChain(0n);
  });

  it('dropped before its refund was sent, then mined again at another log index: settled once, not refundable', async () => {
    const suspense0 = await accountBalance(db(), 'suspense');
    const { observed, raw } = await payEscrow(1_200_000n);
    const refund = await requestRefund(observed);
    await reorg(anvil.provider, 1);
    expect(await anvil.provider.getTransactionReceipt(observed.txHash)).toBeNull();
    await handled(await h.publish('transfer.reorged', reorged(observed)));
    // The refund is still to be sent (settlement sends what the ledger booked): the ledger is at the chain, and
    // the payer owes what the refund will send.
    await expectBooksMatchTheChain(1_200_000n);
    await sendRefund(refund.id, 1_200_000n);
    await expectBooksMatchTheChain(1_200_000n);

    // Mined again second in its block, so its Transfer has another log index: a transfer the ledger has not
    // booked, but the same money, which settles the payer's debt and is the refunded transfer still.
    const moved = await mineAgainElsewhere(raw, observed);
    await expectBooksMatchTheChain(0n);
    expect(await accountBalance(db(), 'suspense')).toBe(suspense0);
    await handled(await h.publish('transfer.refund_requested', refundRequest(moved)));
    expect(await refundsOf(observed.txHash)).toHaveLength(1);
    expect(
      (
        await sql<{ n: number }>`select count(*)::int as n from refunds where payer = ${payer}
            and status = 'pending'`.execute(db())
      ).rows[0]!.n,
    ).toBe(0);
    await expectBooksMatchTheChain(0n);
  });

  it('mined again at another log index before the reorg of the refunded transfer was handled: settled at the reorg', async () => {
    const suspense0 = await accountBalance(db(), 'suspense');
    const { observed, raw } = await payEscrow(700_000n);
    const refund = await requestRefund(observed);
    const refundTx = await sendRefund(refund.id, 700_000n);
    await reorg(anvil.provider, 2);
    expect(await anvil.provider.getTransactionReceipt(observed.txHash)).toBeNull();
    await resend(refundTx.raw, refundTx.hash);
    // The indexer reports the transfer in its new place before the reorg of its old one: booked as a new transfer.
    const moved = await mineAgainElsewhere(raw, observed);
    expect(await accountBalance(db(), 'suspense')).toBe(suspense0 + 700_000n);

    await handled(await h.publish('transfer.reorged', reorged(observed)));
    await expectBooksMatchTheChain(0n);
    expect(await accountBalance(db(), 'suspense')).toBe(suspense0);
    expect(await conflictKinds(observed.txHash)).toEqual(['reorg_after_refund']);
    const transfers = await sql<{
      log_index: number;
      status: string;
      refund_id: string | null;
    }>`select log_index, status, refund_id from transfers where tx_hash = ${observed.txHash} order by log_index`.execute(
      db(),
    );
    expect(transfers.rows.map((t) => [t.log_index, t.status, t.refund_id]).sort()).toEqual(
      [
        [observed.logIndex, 'reorged', refund.id],
        [moved.logIndex, 'observed', refund.id],
      ].sort(),
    );
    await handled(await h.publish('transfer.refund_requested', refundRequest(moved)));
    expect(await refundsOf(observed.txHash)).toHaveLength(1);
    await expectBooksMatchTheChain(0n);
  });
});
