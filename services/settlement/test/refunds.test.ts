import { countStreamMessages, mine, setAutomine, testWallets, waitFor } from '@paygate/testing';
import { recordTransfer } from '../src/transfers/repository';
import { useSettlementHarness } from './harness';
import { publishEvent, refundInitiated } from './helpers';

describe('refunds sent on chain', () => {
  const h = useSettlementHarness('stlref', { overrides: { TX_TIMEOUT_MS: '1000', MAX_TRANSFER_USDC: '50' } });

  const refundRow = (refundId: string) =>
    h.db.selectFrom('refunds').selectAll().where('refund_id', '=', refundId).executeTakeFirst();

  it('sends the refund to the payer once, even when the event is delivered again or re-issued', async () => {
    const buyerBefore = await h.chain.balanceOf(testWallets.buyer.address);
    const event = refundInitiated('ref_one', '2.5', h.chain.anvil.chainId);
    await publishEvent(h.bus, event);
    const done = await waitFor(
      async () => (await refundRow('ref_one'))?.status === 'completed' && refundRow('ref_one'),
      {
        timeoutMs: 20_000,
      },
    );
    expect(await h.chain.balanceOf(testWallets.buyer.address)).toBe(buyerBefore + 2_500_000n);

    // The same event again (JetStream dedupe bypassed with another msg id) and a new event for the same refund.
    await h.bus.js.publish(
      h.bus.subjectFor('refund.initiated'),
      new TextEncoder().encode(JSON.stringify(event)),
      {
        msgID: `again-${event.id}`,
      },
    );
    await publishEvent(h.bus, refundInitiated('ref_one', '2.5', h.chain.anvil.chainId));
    await waitFor(
      async () =>
        Number(
          (
            await h.db
              .selectFrom('inbox')
              .select((eb) => eb.fn.countAll<string>().as('n'))
              .where('consumer', '=', 'settlement-refund-initiated')
              .executeTakeFirstOrThrow()
          ).n,
        ) === 2,
    );
    await h.service.transfers.runOnce();
    const transfers = await h.chain.transfersFromEscrow();
    expect(transfers).toEqual([
      { to: testWallets.buyer.address, amountMicro: 2_500_000n, txHash: done.refund_tx_hash },
    ]);

    const completed = await waitFor(async () => {
      const events = await countStreamMessages(h.bus, 'refund.completed');
      return events.length > 0 && events;
    });
    expect(completed).toHaveLength(1);
    expect(completed[0]!.data).toMatchObject({
      event: 'refund.completed',
      refundId: 'ref_one',
      transactionId: 'txn_ref_one',
      sellerId: 'sel_refunds',
      refundTxHash: done.refund_tx_hash,
      amount: '2.5',
    });
  });

  it('allocates consecutive nonces to concurrent refunds and confirms them all', async () => {
    const before = (await h.chain.transfersFromEscrow()).length;
    for (const [i, payer] of [
      testWallets.buyer.address,
      testWallets.stranger.address,
      testWallets.platform.address,
    ].entries()) {
      await publishEvent(
        h.bus,
        refundInitiated(`ref_many_${i}`, `1.00000${i + 1}`, h.chain.anvil.chainId, payer),
      );
    }
    await waitFor(
      async () =>
        (
          await h.db.selectFrom('refunds').select('status').where('refund_id', 'like', 'ref_many_%').execute()
        ).filter((r) => r.status === 'completed').length === 3,
      { timeoutMs: 20_000 },
    );
    const transfers = await h.db
      .selectFrom('outgoing_transfers')
      .select(['nonce', 'status'])
      .orderBy('nonce')
      .execute();
    expect(transfers.map((t) => t.nonce)).toEqual([0n, 1n, 2n, 3n]);
    expect((await h.chain.transfersFromEscrow()).length).toBe(before + 3);
  });

  it('never lets a signed transaction be re-signed or deleted (database guard)', async () => {
    const row = await h.db.selectFrom('outgoing_transfers').selectAll().limit(1).executeTakeFirstOrThrow();
    await expect(
      h.db
        .updateTable('outgoing_transfers')
        .set({ raw_tx: '0x00' })
        .where('transfer_id', '=', row.transfer_id)
        .execute(),
    ).rejects.toThrow(/immutable/);
    await expect(
      h.db.deleteFrom('outgoing_transfers').where('transfer_id', '=', row.transfer_id).execute(),
    ).rejects.toThrow(/never deleted/);
  });

  it('rebroadcasts the same transaction when no receipt comes within TX_TIMEOUT_MS, and reports it stuck', async () => {
    await setAutomine(h.chain.anvil.provider, false); // the transaction waits in the mempool
    try {
      await publishEvent(h.bus, refundInitiated('ref_slow', '1.5', h.chain.anvil.chainId));
      const transferOf = () =>
        h.db
          .selectFrom('outgoing_transfers')
          .selectAll()
          .where('idempotency_key', '=', 'ref_slow')
          .executeTakeFirst();
      await waitFor(async () => (await transferOf())?.status === 'broadcast');
      const first = (await transferOf())!;
      await waitFor(async () => ((await transferOf())?.broadcast_attempts ?? 0) >= 2, {
        timeoutMs: 5000,
        message: 'rebroadcast after TX_TIMEOUT_MS',
      });
      expect((await transferOf())!.raw_tx).toBe(first.raw_tx);
      const metrics = await fetch(`${h.service.url}/metrics`).then((r) => r.text());
      expect(metrics).toMatch(/settlement_stuck_transfers\{[^}]*\} 1/);
      await mine(h.chain.anvil.provider, 1);
      await waitFor(async () => (await refundRow('ref_slow'))?.status === 'completed', { timeoutMs: 10_000 });
      expect((await h.chain.transfersFromEscrow()).filter((t) => t.amountMicro === 1_500_000n)).toHaveLength(
        1,
      );
      const after = await fetch(`${h.service.url}/metrics`).then((r) => r.text());
      expect(after).toMatch(/settlement_stuck_transfers\{[^}]*\} 0/);
      expect(after).toMatch(/settlement_refunds_sent_total\{[^}]*\} 5/);
    } finally {
      await setAutomine(h.chain.anvil.provider, true);
    }
  });

  it('parks a refund for another chain instead of sending it', async () => {
    // The positive signal that settlement handled it (and refused to send it): the consumer's retry notice.
    const refused: string[] = [];
    const warn = jest.spyOn(h.service.ctx.logger, 'warn').mockImplementation(((fields: {
      eventId?: string;
    }) => {
      if (fields?.eventId) refused.push(fields.eventId);
    }) as never);
    try {
      const event = refundInitiated('ref_wrong_chain', '1', 8453);
      await publishEvent(h.bus, event);
      await waitFor(() => refused.includes(event.id), { message: 'refund for another chain handled' });
    } finally {
      warn.mockRestore();
    }
    expect(await refundRow('ref_wrong_chain')).toBeUndefined();
  });

  /** Waits until the refund consumer refused an event (its retry notice names the event), then stops listening. */
  async function refusedBySettlement(event: ReturnType<typeof refundInitiated>): Promise<string> {
    const refusals = new Map<string, string>();
    const warn = jest.spyOn(h.service.ctx.logger, 'warn').mockImplementation(((fields: {
      eventId?: string;
      err?: Error;
    }) => {
      if (fields?.eventId) refusals.set(fields.eventId, String(fields.err?.message));
    }) as never);
    try {
      await publishEvent(h.bus, event);
      return await waitFor(() => refusals.get(event.id), { message: 'refund.initiated refused' });
    } finally {
      warn.mockRestore();
    }
  }

  it('sends nothing for a refund.initiated above the cap (only the ledger may publish one: libs/bus permissions.test)', async () => {
    const before = (await h.chain.transfersFromEscrow()).length;
    // Above MAX_TRANSFER_USDC (50 here): never recorded, never signed, whatever the event says.
    expect(await refusedBySettlement(refundInitiated('ref_huge', '60', h.chain.anvil.chainId))).toMatch(
      /above MAX_TRANSFER_USDC/,
    );
    expect(await refundRow('ref_huge')).toBeUndefined();
    const metrics = await fetch(`${h.service.url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(
      /settlement_transfers_refused_total\{[^}]*reason="exceeds_transfer_cap"[^}]*\} [1-9]/,
    );
    await h.service.transfers.runOnce();
    expect((await h.chain.transfersFromEscrow()).length).toBe(before);
  });

  it('the transfer worker refuses a recorded transfer above the cap before signing', async () => {
    const before = (await h.chain.transfersFromEscrow()).length;
    // A transfer recorded without the consumer's check (a bug, or a row written by hand).
    const transferId = await h.service.ctx.inTransaction((trx) =>
      recordTransfer(
        trx,
        {
          chainId: h.chain.anvil.chainId,
          usdcAddress: h.chain.usdcAddress,
          address: testWallets.escrow.address,
        },
        {
          kind: 'refund',
          idempotencyKey: 'ref_unchecked',
          toAddress: testWallets.stranger.address,
          amountMicro: 75_000_000n,
        },
      ),
    );
    h.service.transfers.kick();
    const failed = await waitFor(
      async () => {
        const row = await h.db
          .selectFrom('outgoing_transfers')
          .selectAll()
          .where('transfer_id', '=', transferId)
          .executeTakeFirst();
        return row?.status === 'failed' ? row : undefined;
      },
      { message: 'transfer above the cap refused' },
    );
    expect(failed).toMatchObject({ tx_hash: null, raw_tx: null, nonce: null });
    expect(failed.last_error).toMatch(/^not sent: exceeds_transfer_cap/);
    expect((await h.chain.transfersFromEscrow()).length).toBe(before);
  });
});
