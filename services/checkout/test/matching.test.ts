import { parseUsdc } from '@paygate/money';
import { countStreamMessages, EventRecorder, waitFor, waitForConsumerIdle } from '@paygate/testing';
import { sql } from 'kysely';
import request from 'supertest';
import {
  CHECKOUT_WALLET,
  type CheckoutHarness,
  ESCROW,
  MATCHING_MODES,
  publishSkill,
  skillEvent,
  startHarness,
  transferEvent,
} from './helpers';

const OPERATOR = 'Bearer dev-operator-token';

/**
 * The same journeys for both ways a seller's sessions are matched: by unique amount on the checkout wallet (the
 * default), and at a deposit address per session. Where the two differ (less or more than the exact amount), each
 * test says so.
 */
describe.each(MATCHING_MODES)('checkout matching of observed transfers (%s)', (matching) => {
  let h: CheckoutHarness;
  beforeAll(async () => {
    h = await startHarness(matching === 'amount' ? 'comatch' : 'comatchdep', {}, { matching });
    await publishSkill(h, skillEvent(h, { name: 'widget' }, ['5']));
  });
  afterAll(() => h.stop());

  const newSession = async (body: object = { amount: '2', description: 'order' }) => {
    const res = await request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', `Bearer ${h.secretKey}`)
      .send(body);
    expect(res.status).toBe(201);
    return res.body;
  };
  const session = async (id: string) => (await request(h.url).get(`/api/v1/checkout/sessions/${id}`)).body;
  /** Waits until checkout's consumer handled (committed) the event. */
  const handled = (eventId: string) =>
    waitFor(
      async () =>
        (await sql`select 1 from inbox where event_id = ${eventId}`.execute(h.service.ctx.db)).rows.length >
        0,
      { message: `event ${eventId} handled` },
    );
  const waitStatus = (id: string, status: string) =>
    waitFor(async () => (await session(id)).status === status, { message: `session ${id} ${status}` });
  const transferRow = (txHash: string) =>
    waitFor(
      async () =>
        (
          await sql<any>`select transfer_id, status, unmatched_reason from transfers
            where tx_hash = ${txHash.toLowerCase()}`.execute(h.service.ctx.db)
        ).rows[0],
      { message: `transfer ${txHash} recorded` },
    );
  /**
   * A transfer of another amount than the session's exact one, meant for it. At a deposit address the address names
   * the session, so the amount decides at once; at the checkout wallet only the exact amount names a session, so
   * the transfer is kept unmatched (no_session_with_this_amount) and an operator attaches it to its session.
   */
  const payOther = async (s: any, amount: string) => {
    const t = transferEvent(amount, { to: s.walletAddress });
    await h.publish('transfer.observed', t);
    if (matching === 'deposit_address') return t;
    const row = await transferRow(t.txHash);
    expect(row).toMatchObject({ status: 'unmatched', unmatched_reason: 'no_session_with_this_amount' });
    const attached = await request(h.url)
      .post(`/api/v1/operator/transfers/${row.transfer_id}/attach`)
      .set('Authorization', OPERATOR)
      .send({ sessionId: s.sessionId, note: 'the buyer sent another amount' });
    expect(attached.status).toBe(200);
    return t;
  };

  it('tells the buyer what identifies the payment: a unique six-decimal amount on the shared wallet, or its own address', async () => {
    const [a, b] = [await newSession(), await newSession()];
    expect([a.matching, b.matching]).toEqual([matching, matching]);
    if (matching === 'amount') {
      expect([a.walletAddress, b.walletAddress]).toEqual([CHECKOUT_WALLET, CHECKOUT_WALLET]);
      expect(a.exactAmount).not.toBe(b.exactAmount);
      for (const s of [a, b]) {
        expect(s.exactAmount).toMatch(/^2\.00\d{4}$/);
        expect(parseUsdc(s.exactAmount)).toBeGreaterThan(2_000_000n);
      }
    } else {
      expect(a.walletAddress).not.toBe(b.walletAddress);
      expect([a.exactAmount, b.exactAmount]).toEqual(['2.000000', '2.000000']);
    }
  });

  it('pays the session whose exact amount arrives, its payment booked by the ledger exactly once', async () => {
    const s = await newSession();
    const transfer = transferEvent(s.exactAmount, { to: s.walletAddress });
    await h.publish('transfer.observed', transfer);
    await h.publish('transfer.observed', transfer); // the indexer re-publishes (new event id)
    await waitStatus(s.sessionId, 'paid');
    const paid = await session(s.sessionId);
    expect(paid).toMatchObject({
      paidAmount: s.exactAmount,
      txHash: transfer.txHash.toLowerCase(),
      payer: transfer.from,
    });
    // Both copies handled: the second copy's claim was answered with the first booking. The ledger publishes
    // payment.confirmed; checkout publishes none.
    await waitForConsumerIdle(h.bus, 'checkout-transfers');
    await waitFor(async () => (await h.service.ctx.relay.backlog()) === 0);
    const confirmed = h
      .ledgerPayments()
      .filter((p) => p.sessionId === s.sessionId)
      .map((data) => ({ data }));
    expect(confirmed).toHaveLength(1);
    expect(await countStreamMessages(h.bus, 'payment.confirmed')).toEqual([]);
    const recorded = await h.service.ctx.db
      .selectFrom('payments')
      .select('payment_id')
      .where('session_id', '=', s.sessionId)
      .execute();
    expect(recorded).toEqual([{ payment_id: confirmed[0]!.data.paymentId }]);
    expect(confirmed[0]!.data).toMatchObject({
      source: 'checkout',
      sellerId: h.sellerId,
      amount: s.exactAmount,
      txHash: transfer.txHash.toLowerCase(),
      logIndex: 0,
      chainId: 31337,
    });
    const paidEvents = (await countStreamMessages(h.bus, 'checkout.session_paid')).filter(
      (e) => (e.data as any).sessionId === s.sessionId,
    );
    expect(paidEvents).toHaveLength(1);
  });

  it("ignores a transfer to the agent escrow, even of exactly a session's amount: not listed, nothing paid, no warning", async () => {
    const warn = jest.spyOn(h.service.ctx.logger, 'warn');
    try {
      const s = await newSession({ amount: '2.5', description: 'agent price' });
      const toEscrow = transferEvent(s.exactAmount, { to: ESCROW });
      await handled(await h.publish('transfer.observed', toEscrow));
      const recorded = await h.service.ctx.db
        .selectFrom('transfers')
        .select('status')
        .where('tx_hash', '=', toEscrow.txHash.toLowerCase())
        .executeTakeFirst();
      expect(recorded).toBeUndefined();
      expect((await session(s.sessionId)).status).toBe('open');
      // The session's own payment: a normal sale, nothing logged above info.
      await h.publish('transfer.observed', transferEvent(s.exactAmount, { to: s.walletAddress }));
      await waitStatus(s.sessionId, 'paid');
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });

  it('records a payment after expiry, inside the late window, as paid_late', async () => {
    const s = await newSession({ amount: '3', description: 'late' });
    h.clock.advanceSeconds(901);
    await waitStatus(s.sessionId, 'expired');
    await h.publish('transfer.observed', transferEvent(s.exactAmount, { to: s.walletAddress }));
    await waitStatus(s.sessionId, 'paid_late');
  });

  it('decides under- and overpayment of a session; keeps what reaches no session for an operator', async () => {
    const under = await newSession({ amount: '4', description: 'under' });
    const over = await newSession({ amount: '6', description: 'over' });
    const third = await newSession({ amount: '4', description: 'third' });
    const underpaid = new EventRecorder(h.bus, 'checkout.session_underpaid');
    // The bare price sent to the checkout wallet (neither a unique amount nor a session's address), and an
    // unknown amount there.
    const stray = transferEvent('4.000000');
    const junk = transferEvent('0.123456');
    for (const t of [stray, junk]) await h.publish('transfer.observed', t);
    // Less is underpaid (no payment, the operator returns it), more is a payment of what was received (the
    // seller may refund the excess).
    const short = await payOther(under, '3.5');
    await payOther(over, '6.5');
    await waitStatus(under.sessionId, 'underpaid');
    expect(await session(under.sessionId)).toMatchObject({
      paidAmount: '3.500000',
      txHash: short.txHash.toLowerCase(),
    });
    await underpaid.waitForCount(1);
    underpaid.stop();
    await waitStatus(over.sessionId, 'overpaid');
    expect((await session(over.sessionId)).paidAmount).toBe('6.500000');

    const list = async () =>
      (await request(h.url).get('/api/v1/operator/transfers').set('Authorization', OPERATOR)).body
        .transfers as any[];
    const byTx = async (tx: string) => (await list()).find((t) => t.txHash === tx.toLowerCase());
    await waitFor(async () => (await byTx(stray.txHash)) && (await byTx(junk.txHash)));
    expect((await request(h.url).get('/api/v1/operator/transfers')).status).toBe(401);
    const strayView = await byTx(stray.txHash);
    // Never applied by its amount (4 is the price of two open sessions, not their exact amount): only an
    // operator can attach it.
    expect(strayView).toMatchObject({
      status: 'unmatched',
      reason: 'no_session_with_this_amount',
      amount: '4.000000',
    });
    expect((await session(third.sessionId)).status).toBe('open');

    const attach = await request(h.url)
      .post(`/api/v1/operator/transfers/${strayView.transferId}/attach`)
      .set('Authorization', OPERATOR)
      .send({ sessionId: third.sessionId, note: 'buyer sent the bare price, ticket #1182' });
    expect(attach.status).toBe(200);
    // The bare price is less than an amount-matched session's exact amount (price + suffix).
    expect(attach.body.session).toMatchObject({
      status: matching === 'amount' ? 'underpaid' : 'paid',
      paidAmount: '4.000000',
    });
    // An attached transfer cannot be attached again, and a paid session takes no second transfer.
    const again = await request(h.url)
      .post(`/api/v1/operator/transfers/${strayView.transferId}/attach`)
      .set('Authorization', OPERATOR)
      .send({ sessionId: third.sessionId });
    expect(again.status).toBe(409);

    const junkView = await byTx(junk.txHash);
    const refund = await request(h.url)
      .post(`/api/v1/operator/transfers/${junkView.transferId}/refund`)
      .set('Authorization', OPERATOR)
      .send({ note: 'unknown sender' });
    expect(refund.body.transfer).toMatchObject({ status: 'refund_requested', note: 'unknown sender' });
    expect((await list()).map((t) => t.transferId)).not.toContain(junkView.transferId);

    await waitFor(async () => h.ledgerPayments().some((p) => p.sessionId === over.sessionId));
    const confirmed = h.ledgerPayments();
    expect(confirmed.find((p) => p.sessionId === over.sessionId)).toMatchObject({ amount: '6.500000' });
    expect(confirmed.some((p) => p.sessionId === under.sessionId)).toBe(false);
  });

  it('an operator returns the short transfer of an underpaid session (refunded, once); a reorg does not reopen it; an overpaid one is a payment', async () => {
    const under = await newSession({ amount: '7', description: 'short' });
    const over = await newSession({ amount: '8', description: 'long' });
    const short = await payOther(under, '6.9');
    const long = await payOther(over, '8.5');
    const list = async (status: string) =>
      (await request(h.url).get(`/api/v1/operator/transfers?status=${status}`).set('Authorization', OPERATOR))
        .body.transfers as any[];
    const byTx = async (tx: string, status = 'unmatched') =>
      (await list(status)).find((t) => t.txHash === tx.toLowerCase());
    // Matched at the sessions' own addresses, or attached by the operator at the checkout wallet.
    const decided = matching === 'amount' ? 'attached' : 'matched';
    const shortView = await waitFor(() => byTx(short.txHash, decided));
    const longView = await waitFor(() => byTx(long.txHash, decided));
    const refund = (transferId: string) =>
      request(h.url)
        .post(`/api/v1/operator/transfers/${transferId}/refund`)
        .set('Authorization', OPERATOR)
        .send({});
    await waitStatus(under.sessionId, 'underpaid');
    await waitStatus(over.sessionId, 'overpaid');

    const refunded = new EventRecorder(h.bus, 'checkout.session_refunded');
    const requested = new EventRecorder(h.bus, 'transfer.refund_requested');
    const first = await refund(shortView.transferId);
    expect(first.status).toBe(200);
    expect(first.body.transfer).toMatchObject({
      status: 'refund_requested',
      sessionId: under.sessionId,
      amount: '6.900000',
    });
    expect(first.body.session).toMatchObject({ status: 'refunded', paidAmount: '6.900000' });
    const second = await refund(shortView.transferId);
    expect(second.status).toBe(409);
    expect(second.body.error.code).toBe('transfer_not_unmatched');
    // The junk transfer's refund earlier in this file may be heard late: wait for this session's own events.
    await refunded.waitForEvent((data) => data.sessionId === under.sessionId);
    const refundRequest = await requested.waitForEvent((data) => data.sessionId === under.sessionId);
    expect(refundRequest.data).toMatchObject({ amount: '6.900000' });
    refunded.stop();
    requested.stop();
    expect(await session(under.sessionId)).toMatchObject({ status: 'refunded', paidAmount: '6.900000' });
    // Its amount is free again: the refunded session matches nothing any more.
    const reserved = await h.service.ctx.db
      .selectFrom('sessions')
      .select('amount_reserved')
      .where('session_id', '=', under.sessionId)
      .executeTakeFirstOrThrow();
    expect(reserved.amount_reserved).toBe(false);

    // The overpaid session's transfer paid the seller: refunding it here is refused, the session stays overpaid.
    const paidRefund = await refund(longView.transferId);
    expect(paidRefund.status).toBe(409);
    expect(paidRefund.body.error).toMatchObject({ code: 'transfer_not_unmatched' });
    expect(paidRefund.body.error.message).toMatch(/it paid its session/);
    expect((await session(over.sessionId)).status).toBe('overpaid');

    // A reorg of the returned transfer does not bring the refunded session back to open.
    const { confirmations: _c, observedAt: _o, ...fields } = short;
    await h.publish('transfer.reorged', { ...fields, reorgedAt: new Date().toISOString() });
    await waitFor(() => byTx(short.txHash, 'reorged'), { message: 'returned transfer reorged' });
    expect(await session(under.sessionId)).toMatchObject({ status: 'refunded', paidAmount: '6.900000' });
  });

  it('a second payment of a paid amount, or one after the late window, is kept unmatched', async () => {
    const s = await newSession({ amount: '8', description: 'twice' });
    await h.publish('transfer.observed', transferEvent(s.exactAmount, { to: s.walletAddress }));
    await waitStatus(s.sessionId, 'paid');
    const second = transferEvent(s.exactAmount, { to: s.walletAddress });
    await h.publish('transfer.observed', second);
    const found = await waitFor(async () => {
      const rows = (await request(h.url).get('/api/v1/operator/transfers').set('Authorization', OPERATOR))
        .body.transfers as any[];
      return rows.find((t) => t.txHash === second.txHash.toLowerCase());
    });
    expect(found).toMatchObject({ reason: 'session_already_paid', candidateSessionId: s.sessionId });

    const gone = await newSession({ amount: '9', description: 'too late' });
    h.clock.advanceSeconds(900 + 86_400 + 5);
    // The unique amount is released once its late window has passed (the sweeper): then it names no session.
    if (matching === 'amount') {
      await waitFor(
        async () =>
          !(
            await h.service.ctx.db
              .selectFrom('sessions')
              .select('amount_reserved')
              .where('session_id', '=', gone.sessionId)
              .executeTakeFirstOrThrow()
          ).amount_reserved,
        { message: 'amount released' },
      );
    }
    const late = transferEvent(gone.exactAmount, { to: gone.walletAddress });
    await h.publish('transfer.observed', late);
    await waitFor(async () => {
      const rows = (await request(h.url).get('/api/v1/operator/transfers').set('Authorization', OPERATOR))
        .body.transfers as any[];
      return rows.find((t) => t.txHash === late.txHash.toLowerCase());
    });
    expect(
      (
        (await request(h.url).get('/api/v1/operator/transfers').set('Authorization', OPERATOR)).body
          .transfers as any[]
      ).find((t) => t.txHash === late.txHash.toLowerCase()),
    ).toMatchObject(
      matching === 'amount'
        ? { reason: 'no_session_with_this_amount', candidateSessionId: null }
        : { reason: 'late_window_passed', candidateSessionId: gone.sessionId },
    );
    expect((await session(gone.sessionId)).status).toBe('expired');
  });

  it('a reorg that removes the paying transfer reopens the session and publishes the reversal', async () => {
    const s = await newSession({ amount: '11', description: 'reorg me' });
    const transfer = transferEvent(s.exactAmount, { to: s.walletAddress });
    await h.publish('transfer.observed', transfer);
    await waitStatus(s.sessionId, 'paid');
    const reopened = new EventRecorder(h.bus, 'checkout.session_reopened');
    const { confirmations: _c, observedAt: _o, ...fields } = transfer;
    await h.publish('transfer.reorged', { ...fields, reorgedAt: new Date().toISOString() });
    await waitStatus(s.sessionId, 'open');
    const reopenedSession = await session(s.sessionId);
    expect(reopenedSession).toMatchObject({ txHash: null, paidAmount: null, payer: null });
    await reopened.waitForCount(1);
    reopened.stop();
    const reversed = await waitFor(async () =>
      (await countStreamMessages(h.bus, 'payment.reversed')).filter(
        (e) => (e.data as any).sessionId === s.sessionId,
      ),
    );
    expect(reversed).toHaveLength(1);
    // The same transfer mined again in another block pays the session again.
    await h.publish('transfer.observed', {
      ...transfer,
      blockHash: `0x${'ab'.repeat(32)}`,
      blockNumber: 999,
    });
    await waitStatus(s.sessionId, 'paid');
    expect(parseUsdc((await session(s.sessionId)).paidAmount)).toBe(parseUsdc(s.exactAmount));
  });

  it('a transfer seen again in another block before the reorg of its old block is handled: that reorg reopens nothing', async () => {
    const s = await newSession({ amount: '12', description: 'moved block' });
    const transfer = transferEvent(s.exactAmount, { to: s.walletAddress });
    await h.publish('transfer.observed', transfer);
    await waitStatus(s.sessionId, 'paid');
    // Mined again in another block; the indexer's reorg of the first block reaches checkout only afterwards.
    const moved = { ...transfer, blockHash: `0x${'cd'.repeat(32)}`, blockNumber: 1001 };
    await h.publish('transfer.observed', moved);
    await waitFor(
      async () =>
        (
          await h.service.ctx.db
            .selectFrom('transfers')
            .select('block_hash')
            .where('tx_hash', '=', transfer.txHash.toLowerCase())
            .executeTakeFirst()
        )?.block_hash === moved.blockHash,
      { message: 'the transfer never moved to its new block' },
    );
    const { confirmations: _c, observedAt: _o, ...fields } = transfer;
    const staleReorg = await h.publish('transfer.reorged', {
      ...fields,
      reorgedAt: new Date().toISOString(),
    });
    await waitFor(
      async () =>
        (await sql`select 1 from inbox where event_id = ${staleReorg}`.execute(h.service.ctx.db)).rows
          .length > 0,
      { message: 'the stale reorg was not handled' },
    );
    expect((await session(s.sessionId)).status).toBe('paid');
  });

  it("a reorg handled before its block's transfer.observed: that observation pays nothing; the transfer mined again in the same block does", async () => {
    const s = await newSession({ amount: '13', description: 'reorg first' });
    const transfer = transferEvent(s.exactAmount, { to: s.walletAddress });
    // The indexer published observed, then reorged; the observed consumer was behind and sees it only after.
    const { confirmations: _c, observedAt: _o, ...fields } = transfer;
    await handled(await h.publish('transfer.reorged', { ...fields, reorgedAt: new Date().toISOString() }));
    await handled(await h.publish('transfer.observed', transfer));
    expect((await session(s.sessionId)).status).toBe('open');
    // The chain went back to that block: the indexer publishes the transfer again, and now it pays.
    await h.publish('transfer.observed', { ...transfer, observedAt: new Date().toISOString() });
    await waitStatus(s.sessionId, 'paid');
  });

  it('a transfer reorged again from its new block before that block was observed: the late observation pays nothing', async () => {
    const s = await newSession({ amount: '14', description: 'reorg twice' });
    const transfer = transferEvent(s.exactAmount, { to: s.walletAddress });
    await h.publish('transfer.observed', transfer);
    await waitStatus(s.sessionId, 'paid');
    const { confirmations: _c, observedAt: _o, ...fields } = transfer;
    await h.publish('transfer.reorged', { ...fields, reorgedAt: new Date().toISOString() });
    await waitStatus(s.sessionId, 'open');
    // Mined again in another block, which a reorg also removed; the reorg reaches checkout first.
    const moved = { ...transfer, blockHash: `0x${'ef'.repeat(32)}`, blockNumber: 1002 };
    const { confirmations: _c2, observedAt: _o2, ...movedFields } = moved;
    await handled(
      await h.publish('transfer.reorged', { ...movedFields, reorgedAt: new Date().toISOString() }),
    );
    await handled(await h.publish('transfer.observed', moved));
    expect((await session(s.sessionId)).status).toBe('open');
    await h.publish('transfer.observed', { ...moved, observedAt: new Date().toISOString() });
    await waitStatus(s.sessionId, 'paid');
  });
});
