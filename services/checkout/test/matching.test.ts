import { parseUsdc } from '@paygate/money';
import { countStreamMessages, EventRecorder, waitFor, waitForConsumerIdle } from '@paygate/testing';
import request from 'supertest';
import { type CheckoutHarness, publishSkill, skillEvent, startHarness, transferEvent } from './helpers';

const OPERATOR = 'Bearer dev-operator-token';

describe('checkout matching of observed transfers', () => {
  let h: CheckoutHarness;
  beforeAll(async () => {
    h = await startHarness('comatch');
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
  const waitStatus = (id: string, status: string) =>
    waitFor(async () => (await session(id)).status === status, { message: `session ${id} ${status}` });

  it('pays the session whose exact amount arrives, publishing payment.confirmed exactly once', async () => {
    const s = await newSession();
    const transfer = transferEvent(s.exactAmount);
    await h.publish('transfer.observed', transfer);
    await h.publish('transfer.observed', transfer); // the indexer re-publishes (new event id)
    await waitStatus(s.sessionId, 'paid');
    const paid = await session(s.sessionId);
    expect(paid).toMatchObject({
      paidAmount: s.exactAmount,
      txHash: transfer.txHash.toLowerCase(),
      payer: transfer.from,
    });
    // Both copies handled and everything checkout wrote relayed: a second payment.confirmed would be out by now.
    await waitForConsumerIdle(h.bus, 'checkout-transfers');
    await waitFor(async () => (await h.running.ctx.relay.backlog()) === 0);
    const confirmed = (await countStreamMessages(h.bus, 'payment.confirmed')).filter(
      (e) => (e.data as any).sessionId === s.sessionId,
    );
    expect(confirmed).toHaveLength(1);
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

  it('records a payment after expiry, inside the late window, as paid_late', async () => {
    const s = await newSession({ amount: '3', description: 'late' });
    h.clock.advanceSeconds(901);
    await waitStatus(s.sessionId, 'expired');
    await h.publish('transfer.observed', transferEvent(s.exactAmount));
    await waitStatus(s.sessionId, 'paid_late');
  });

  it('keeps transfers that match nothing, and lets an operator attach them (underpaid, overpaid) or mark a refund', async () => {
    const under = await newSession({ amount: '4', description: 'under' });
    const over = await newSession({ amount: '6', description: 'over' });
    const stray = transferEvent('4.000000'); // the price without the suffix
    const big = transferEvent('6.5');
    const junk = transferEvent('0.123456');
    for (const t of [stray, big, junk]) await h.publish('transfer.observed', t);
    const list = async () =>
      (await request(h.url).get('/api/v1/operator/transfers').set('Authorization', OPERATOR)).body
        .transfers as any[];
    await waitFor(async () => (await list()).length >= 3);
    expect((await request(h.url).get('/api/v1/operator/transfers')).status).toBe(401);
    const byTx = async (tx: string) => (await list()).find((t) => t.txHash === tx.toLowerCase());
    const strayView = await byTx(stray.txHash);
    expect(strayView).toMatchObject({
      status: 'unmatched',
      reason: 'no_session_with_this_amount',
      amount: '4.000000',
    });
    // One shared escrow address: a non-exact amount is never applied to a session on its own.
    const stillOpen = await request(h.url).get(`/api/v1/checkout/sessions/${under.sessionId}`);
    expect(stillOpen.body).toMatchObject({ status: 'open', paidAmount: null, txHash: null });
    const overOpen = await request(h.url).get(`/api/v1/checkout/sessions/${over.sessionId}`);
    expect(overOpen.body).toMatchObject({ status: 'open', paidAmount: null });
    const payments = await h.running.ctx.db
      .selectFrom('payments')
      .select('payment_id')
      .where('session_id', 'in', [under.sessionId, over.sessionId])
      .execute();
    expect(payments).toHaveLength(0);

    const underpaid = new EventRecorder(h.bus, 'checkout.session_underpaid');
    const attach = await request(h.url)
      .post(`/api/v1/operator/transfers/${strayView.transferId}/attach`)
      .set('Authorization', OPERATOR)
      .send({ sessionId: under.sessionId, note: 'buyer forgot the suffix' });
    expect(attach.status).toBe(200);
    expect(attach.body.session).toMatchObject({ status: 'underpaid', paidAmount: '4.000000' });
    await underpaid.waitForCount(1);
    underpaid.stop();

    const bigView = await byTx(big.txHash);
    const overpaid = await request(h.url)
      .post(`/api/v1/operator/transfers/${bigView.transferId}/attach`)
      .set('Authorization', OPERATOR)
      .send({ sessionId: over.sessionId });
    expect(overpaid.body.session).toMatchObject({ status: 'overpaid', paidAmount: '6.500000' });
    // An attached transfer cannot be attached again, and a paid session takes no second transfer.
    const again = await request(h.url)
      .post(`/api/v1/operator/transfers/${bigView.transferId}/attach`)
      .set('Authorization', OPERATOR)
      .send({ sessionId: over.sessionId });
    expect(again.status).toBe(409);

    const junkView = await byTx(junk.txHash);
    const refund = await request(h.url)
      .post(`/api/v1/operator/transfers/${junkView.transferId}/refund`)
      .set('Authorization', OPERATOR)
      .send({ note: 'unknown sender' });
    expect(refund.body.transfer).toMatchObject({ status: 'refund_requested', note: 'unknown sender' });
    expect((await list()).map((t) => t.transferId)).not.toContain(junkView.transferId);

    await waitFor(async () =>
      (await countStreamMessages(h.bus, 'payment.confirmed')).some(
        (e) => (e.data as any).sessionId === over.sessionId,
      ),
    );
    const confirmed = await countStreamMessages(h.bus, 'payment.confirmed');
    expect(confirmed.some((e) => (e.data as any).sessionId === under.sessionId)).toBe(false);
  });

  it('an operator returns the short transfer of an underpaid session (refunded, once); a reorg does not reopen it; an overpaid one is a payment', async () => {
    const under = await newSession({ amount: '7', description: 'short' });
    const over = await newSession({ amount: '8', description: 'long' });
    const short = transferEvent('7.000000');
    const long = transferEvent('8.5');
    for (const t of [short, long]) await h.publish('transfer.observed', t);
    const list = async (status: string) =>
      (await request(h.url).get(`/api/v1/operator/transfers?status=${status}`).set('Authorization', OPERATOR))
        .body.transfers as any[];
    const byTx = async (tx: string, status = 'unmatched') =>
      (await list(status)).find((t) => t.txHash === tx.toLowerCase());
    const shortView = await waitFor(() => byTx(short.txHash));
    const longView = await waitFor(() => byTx(long.txHash));
    const attach = (transferId: string, sessionId: string) =>
      request(h.url)
        .post(`/api/v1/operator/transfers/${transferId}/attach`)
        .set('Authorization', OPERATOR)
        .send({ sessionId });
    const refund = (transferId: string) =>
      request(h.url)
        .post(`/api/v1/operator/transfers/${transferId}/refund`)
        .set('Authorization', OPERATOR)
        .send({});
    expect((await attach(shortView.transferId, under.sessionId)).body.session.status).toBe('underpaid');
    expect((await attach(longView.transferId, over.sessionId)).body.session.status).toBe('overpaid');

    const refunded = new EventRecorder(h.bus, 'checkout.session_refunded');
    const requested = new EventRecorder(h.bus, 'transfer.refund_requested');
    const first = await refund(shortView.transferId);
    expect(first.status).toBe(200);
    expect(first.body.transfer).toMatchObject({
      status: 'refund_requested',
      sessionId: under.sessionId,
      amount: '7.000000',
    });
    expect(first.body.session).toMatchObject({ status: 'refunded', paidAmount: '7.000000' });
    const second = await refund(shortView.transferId);
    expect(second.status).toBe(409);
    expect(second.body.error.code).toBe('transfer_not_unmatched');
    await refunded.waitForCount(1);
    await requested.waitForCount(1);
    expect(requested.events[0]!.data).toMatchObject({ sessionId: under.sessionId, amount: '7.000000' });
    refunded.stop();
    requested.stop();
    expect(await session(under.sessionId)).toMatchObject({ status: 'refunded', paidAmount: '7.000000' });
    // Its amount is free again: the refunded session matches nothing any more.
    const reserved = await h.running.ctx.db
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
    expect(await session(under.sessionId)).toMatchObject({ status: 'refunded', paidAmount: '7.000000' });
  });

  it('a second payment of a paid amount, or one after the late window, is kept unmatched', async () => {
    const s = await newSession({ amount: '8', description: 'twice' });
    await h.publish('transfer.observed', transferEvent(s.exactAmount));
    await waitStatus(s.sessionId, 'paid');
    const second = transferEvent(s.exactAmount);
    await h.publish('transfer.observed', second);
    const found = await waitFor(async () => {
      const rows = (await request(h.url).get('/api/v1/operator/transfers').set('Authorization', OPERATOR))
        .body.transfers as any[];
      return rows.find((t) => t.txHash === second.txHash.toLowerCase());
    });
    expect(found).toMatchObject({ reason: 'session_already_paid', candidateSessionId: s.sessionId });

    const gone = await newSession({ amount: '9', description: 'too late' });
    h.clock.advanceSeconds(900 + 86_400 + 5);
    const late = transferEvent(gone.exactAmount);
    await h.publish('transfer.observed', late);
    await waitFor(async () => {
      const rows = (await request(h.url).get('/api/v1/operator/transfers').set('Authorization', OPERATOR))
        .body.transfers as any[];
      return rows.find((t) => t.txHash === late.txHash.toLowerCase());
    });
    expect((await session(gone.sessionId)).status).toBe('expired');
  });

  it('a reorg that removes the paying transfer reopens the session and publishes the reversal', async () => {
    const s = await newSession({ amount: '11', description: 'reorg me' });
    const transfer = transferEvent(s.exactAmount);
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
});
