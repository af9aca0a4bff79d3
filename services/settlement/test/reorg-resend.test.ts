/**
 * A reorg that drops a transaction of a sending wallet leaves its nonce unconsumed: unless it is sent again, the
 * relayer bumps later nonces forever ("relayed authorization stuck; fees bumped") and escrow's later payouts wait. Each case here drops the sender's own
 * mined transaction with a real anvil_reorg and checks it is mined again, the same bytes (same hash), once.
 */
import { formatAddress, getTransferLogs } from '@paygate/chain';
import type { RelayerSubmitReply, RelayerSubmitRequest } from '@paygate/contracts';
import {
  mine,
  reorg,
  setAutomine,
  signTransferAuthorization,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { AbiCoder, keccak256, toBeHex, zeroPadValue } from 'ethers';
import { REVERTED_AFTER_CONFIRMATION } from '../src/transfers/confirmation-watch';
import { useSettlementHarness } from './harness';
import { publishEvent, refundInitiated } from './helpers';

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const PRICE = 70_000n;

describe('a reorg that drops the sender’s own transaction: sent again with the same bytes', () => {
  const escrow = testWallets.escrow.address;
  const h = useSettlementHarness('reorgsend', {
    buyerFunds: '10',
    overrides: {
      RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey,
      RELAYER_FEE_BUMP_AFTER_MS: '300',
      TRANSFER_POLL_INTERVAL_MS: '100',
      // Far beyond the test: a dropped transfer must be sent again because it was dropped, not by timeout.
      TX_TIMEOUT_MS: '600000',
      CONFIRMATIONS: '2',
    },
  });

  async function rpc<T>(subject: string, body: unknown): Promise<T> {
    const reply = await h.bus.nc.request(h.bus.rpcSubject(subject), encoder.encode(JSON.stringify(body)), {
      timeout: 15_000,
    });
    return JSON.parse(decoder.decode(reply.data)) as T;
  }

  async function submission(waitForReceiptMs: number): Promise<RelayerSubmitRequest> {
    const signed = await signTransferAuthorization(testSigner('buyer', h.chain.anvil.provider), {
      chainId: h.chain.anvil.chainId,
      usdcAddress: h.chain.usdcAddress,
      to: escrow,
      valueMicro: PRICE,
    });
    return {
      chainId: h.chain.anvil.chainId,
      token: h.chain.usdcAddress,
      authorization: signed.authorization,
      signature: signed.signature,
      waitForReceiptMs,
    };
  }

  async function transfersIntoEscrowFromBuyer() {
    const head = await h.chain.anvil.provider.getBlockNumber();
    const logs = await getTransferLogs(h.chain.anvil.provider, {
      token: h.chain.usdcAddress,
      fromBlock: 0,
      toBlock: head,
      maxRangeBlocks: 10_000,
    });
    return logs.filter(
      (log) => log.to === formatAddress(escrow) && log.from === formatAddress(testWallets.buyer.address),
    );
  }

  /** Escrow's outgoing transfer for a refund (its idempotency key is the refund id). */
  const outgoingTransfer = (key: string) =>
    h.db.selectFrom('outgoing_transfers').selectAll().where('idempotency_key', '=', key).executeTakeFirst();

  /** Sets escrow's USDC balance: TestUSDC's balanceOf is its third storage slot (emptied, a pending transfer reverts). */
  const setEscrowBalance = (micro: bigint) =>
    h.chain.anvil.provider.send('anvil_setStorageAt', [
      h.chain.usdcAddress,
      keccak256(AbiCoder.defaultAbiCoder().encode(['address', 'uint256'], [escrow, 2])),
      zeroPadValue(toBeHex(micro), 32),
    ]);

  const relayed = (authNonce: string) =>
    h.db
      .selectFrom('relayed_authorizations')
      .selectAll()
      .where('auth_nonce', '=', authNonce.toLowerCase())
      .executeTakeFirstOrThrow();

  it('relayer: a confirmed submission dropped by a reorg is broadcast again before a later nonce is bumped', async () => {
    const before = (await transfersIntoEscrowFromBuyer()).length;
    const first = await submission(10_000);
    const answered = await rpc<RelayerSubmitReply>('relayer.submit_authorization', first);
    expect(answered).toMatchObject({ ok: true, status: 'confirmed' });
    if (!answered.ok) throw new Error('unreachable');
    // x402 books the payment on this answer. The block holding it is the head (automine): drop it.
    await reorg(h.chain.anvil.provider, 1);
    const droppedNonce = (await relayed(first.authorization.nonce)).relayer_nonce!;

    // A later submission gets the next relayer nonce and waits behind the gap until the dropped one is mined.
    const second = await submission(0);
    expect(await rpc<RelayerSubmitReply>('relayer.submit_authorization', second)).toMatchObject({ ok: true });

    const secondDone = await waitFor(
      async () => {
        const row = await relayed(second.authorization.nonce);
        return row.status === 'confirmed' && row;
      },
      {
        timeoutMs: 15_000,
        message: 'the later submission never confirmed: the dropped nonce was not sent again',
      },
    );
    await waitFor(async () => (await relayed(first.authorization.nonce)).reorg_rebroadcasts >= 1, {
      timeoutMs: 5_000,
    });
    expect(secondDone.relayer_nonce).toBe(droppedNonce + 1n);
    // The very transaction x402 booked is on the chain again (same hash), and the payer paid once per submission.
    const receipt = await h.chain.anvil.provider.getTransactionReceipt(answered.txHash);
    expect(receipt?.status).toBe(1);
    expect((await transfersIntoEscrowFromBuyer()).length).toBe(before + 2);
    // Watched until CONFIRMATIONS deep, then final.
    await mine(h.chain.anvil.provider, 2);
    await waitFor(async () => (await relayed(first.authorization.nonce)).final_at !== null, {
      timeoutMs: 10_000,
      message: 'the re-mined submission was never marked final',
    });
  });

  it('escrow: a confirmed refund dropped by a reorg within the watch window is sent again, once', async () => {
    const buyerBefore = await h.chain.balanceOf(testWallets.buyer.address);
    await publishEvent(h.bus, refundInitiated('ref_reorged', '1.25', h.chain.anvil.chainId));
    const transfer = () => outgoingTransfer('ref_reorged');
    // CONFIRMATIONS=2: the transfer block and one more; nothing else is mined here, so help it along.
    const confirmed = await waitFor(
      async () => {
        const row = await transfer();
        // Mined in the head block: one more block confirms it (never more, so it stays within the watch window).
        if (
          row?.status === 'broadcast' &&
          row.block_number === BigInt(await h.chain.anvil.provider.getBlockNumber())
        )
          await mine(h.chain.anvil.provider, 1);
        return row?.status === 'confirmed' && row;
      },
      { timeoutMs: 20_000, message: 'the refund was never confirmed' },
    );
    expect(await h.chain.balanceOf(testWallets.buyer.address)).toBe(buyerBefore + 1_250_000n);
    // Reorg out its block and those after it: the refund leaves the chain after settlement reported it completed. (The watcher may
    // send it again within one poll, so what is checked is that it is mined again in another block.)
    const minedIn = (await h.chain.anvil.provider.getTransactionReceipt(confirmed.tx_hash!))!;
    const depth = (await h.chain.anvil.provider.getBlockNumber()) - minedIn.blockNumber + 1;
    expect(depth).toBeLessThan(4); // within the watch window (2 x CONFIRMATIONS)
    await reorg(h.chain.anvil.provider, depth);
    expect(await h.chain.anvil.provider.getTransactionReceipt(confirmed.tx_hash!)).toBeNull();
    await waitFor(
      async () => {
        const receipt = await h.chain.anvil.provider.getTransactionReceipt(confirmed.tx_hash!);
        return receipt !== null && receipt.blockHash !== minedIn.blockHash;
      },
      { timeoutMs: 15_000, message: 'the dropped refund was not sent again' },
    );
    expect(await h.chain.balanceOf(testWallets.buyer.address)).toBe(buyerBefore + 1_250_000n);
    const refunds = (await h.chain.transfersFromEscrow()).filter((t) => t.txHash === confirmed.tx_hash);
    expect(refunds).toHaveLength(1);
    // Recorded right after the broadcast (which anvil mines at once).
    await waitFor(async () => (await transfer())!.reorg_rebroadcasts >= 1, { timeoutMs: 5_000 });
    await mine(h.chain.anvil.provider, 4);
    await waitFor(async () => (await transfer())!.final_at !== null, {
      timeoutMs: 10_000,
      message: 'the re-mined refund was never marked final',
    });
  });

  it('escrow: a reverted refund is reported failed only once final; a reorg before that which lets it succeed ends it confirmed, once', async () => {
    const provider = h.chain.anvil.provider;
    const buyerBefore = await h.chain.balanceOf(testWallets.buyer.address);
    const escrowFunds = await h.chain.balanceOf(escrow);
    const transfer = outgoingTransfer;
    const broadcast = (key: string) =>
      waitFor(
        async () => {
          const row = await transfer(key);
          return row?.status === 'broadcast' && row.tx_hash !== null && row;
        },
        { timeoutMs: 20_000, message: `${key} was never broadcast` },
      );

    await setAutomine(provider, false);
    try {
      await publishEvent(h.bus, refundInitiated('ref_reverts', '2.5', h.chain.anvil.chainId));
      const reverting = await broadcast('ref_reverts');
      await setEscrowBalance(0n);
      expect(await h.chain.balanceOf(escrow)).toBe(0n); // the slot is the right one
      await mine(provider, 1);
      const reverted = (await provider.getTransactionReceipt(reverting.tx_hash!))!;
      expect(reverted.status).toBe(0);
      await setEscrowBalance(escrowFunds);

      // CONFIRMATIONS (2) deep and then one more: a later refund (next nonce) is seen mined in a pass that looked
      // at the reverted one first (passes go in nonce order), with the revert at least CONFIRMATIONS deep.
      await mine(provider, 1);
      await publishEvent(h.bus, refundInitiated('ref_marker', '0.5', h.chain.anvil.chainId));
      await broadcast('ref_marker');
      await mine(provider, 1);
      await waitFor(async () => (await transfer('ref_marker'))!.block_number !== null, {
        timeoutMs: 20_000,
        message: 'the later refund was never seen mined',
      });
      // A revert is not final at CONFIRMATIONS: reported failed, escrow's owner would pay the money out again.
      expect((await transfer('ref_reverts'))!.status).toBe('broadcast');

      // A reorg takes the revert away (and the emptied balance with it): the same bytes are sent again and succeed.
      await reorg(provider, 3);
      await setEscrowBalance(escrowFunds);
      await waitFor(
        async () => {
          const receipt = await provider.getTransactionReceipt(reverting.tx_hash!);
          if (receipt === null) await mine(provider, 1);
          return receipt?.status === 1;
        },
        { timeoutMs: 20_000, message: 'the refund was not mined again after the reorg' },
      );
      await mine(provider, 2);
      await waitFor(async () => (await transfer('ref_reverts'))!.status === 'confirmed', {
        timeoutMs: 20_000,
        message: 'the re-mined refund was never confirmed',
      });
    } finally {
      await setAutomine(provider, true);
    }
    const sent = (await h.chain.transfersFromEscrow()).filter(
      (t) => t.to === formatAddress(testWallets.buyer.address),
    );
    expect(sent.filter((t) => t.amountMicro === 2_500_000n)).toHaveLength(1);
    await waitFor(async () => (await transfer('ref_marker'))!.status === 'confirmed', { timeoutMs: 20_000 });
    expect(await h.chain.balanceOf(testWallets.buyer.address)).toBe(buyerBefore + 3_000_000n);
  });

  it('escrow: a confirmed refund that a reorg drops and the chain then mines reverted is final with the reason, counted', async () => {
    const provider = h.chain.anvil.provider;
    const transfer = () => outgoingTransfer('ref_remined');
    await publishEvent(h.bus, refundInitiated('ref_remined', '0.75', h.chain.anvil.chainId));
    const confirmed = await waitFor(
      async () => {
        const row = await transfer();
        if (row?.status === 'broadcast' && row.block_number === BigInt(await provider.getBlockNumber()))
          await mine(provider, 1);
        return row?.status === 'confirmed' && row;
      },
      { timeoutMs: 20_000, message: 'the refund was never confirmed' },
    );
    const minedIn = (await provider.getTransactionReceipt(confirmed.tx_hash!))!;
    const escrowFunds = await h.chain.balanceOf(escrow);
    await setAutomine(provider, false);
    try {
      // The reorg drops it; escrow cannot cover it now, so settlement does not send it again, but anyone may send
      // the same bytes from the public mempool (here the test does), and the chain mines them reverted.
      await reorg(provider, (await provider.getBlockNumber()) - minedIn.blockNumber + 1);
      await setEscrowBalance(0n);
      await provider.send('eth_sendRawTransaction', [confirmed.raw_tx]).catch(() => undefined); // may be pooled
      await mine(provider, 1);
      const remined = (await provider.getTransactionReceipt(confirmed.tx_hash!))!;
      expect(remined.status).toBe(0);
      await setEscrowBalance(escrowFunds);
      await mine(provider, 4);
      const final = await waitFor(
        async () => {
          const row = (await transfer())!;
          return row.final_at !== null && row;
        },
        { timeoutMs: 20_000, message: 'the re-mined refund was never final' },
      );
      expect(final).toMatchObject({ status: 'confirmed', last_error: REVERTED_AFTER_CONFIRMATION });
      const counted = await h.service.ctx.metrics.registry
        .getSingleMetric('settlement_transfers_reverted_after_confirmation_total')
        ?.get();
      expect(counted?.values).toEqual([expect.objectContaining({ labels: { kind: 'refund' }, value: 1 })]);
    } finally {
      await setAutomine(provider, true);
    }
  });
});
