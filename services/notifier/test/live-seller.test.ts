import { waitFor } from '@paygate/testing';
import { type NotifierHarness, startNotifierHarness } from './harness';
import {
  OTHER_SELLER_ID,
  paymentConfirmed,
  publish,
  SELLER_ID,
  sellerIdentity,
  sellerUpdated,
  WidgetSocket,
} from './helpers';

jest.setTimeout(45_000);

// Seller A signs in to the dashboard (a session token), seller B uses its sk_ key: both resolve like REST calls.
const SESSION_TOKEN_A = `${'a'.repeat(20)}.${'b'.repeat(40)}.${'c'.repeat(43)}`;
const API_KEY_B = 'sk_test_seller_two_0123456789';

describe("notifier live channel for a seller's dashboard", () => {
  let h: NotifierHarness;
  const sockets: WidgetSocket[] = [];
  const open = async () => {
    const socket = await WidgetSocket.open(h.url);
    sockets.push(socket);
    return socket;
  };
  const sellerEvents = (socket: WidgetSocket) => socket.messages.filter((m) => m.type === 'seller_event');

  beforeAll(async () => {
    h = await startNotifierHarness('notiflive', {
      settings: { WS_IDLE_TIMEOUT_MS: '400' },
      secrets: { [SELLER_ID]: { secret: 'whsec_live_0123456789', version: 1 } },
      sellers: { [SESSION_TOKEN_A]: sellerIdentity(SELLER_ID), [API_KEY_B]: sellerIdentity(OTHER_SELLER_ID) },
    });
  });

  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await h?.stop();
  });

  it('sends each seller its own changes only, and nothing to a socket that did not sign in', async () => {
    const sellerA = await open();
    const sellerB = await open();
    const widget = await open();
    sellerA.send({ type: 'authenticate', token: SESSION_TOKEN_A });
    sellerB.send({ type: 'authenticate', token: API_KEY_B });
    widget.send({ type: 'subscribe', sessionId: 'cs_unrelated' });
    await waitFor(() => sellerA.messages.some((m) => m.type === 'authenticated'), { message: 'A signed in' });
    await waitFor(() => sellerB.messages.some((m) => m.type === 'authenticated'), { message: 'B signed in' });
    expect(sellerA.messages).toEqual([{ type: 'authenticated', sellerId: SELLER_ID }]);
    expect(sellerB.messages).toEqual([{ type: 'authenticated', sellerId: OTHER_SELLER_ID }]);

    const paidA = await publish(h.bus, 'payment.confirmed', 'escrow-ledger', paymentConfirmed(SELLER_ID));
    const refundA = await publish(h.bus, 'refund.requested', 'escrow-ledger', {
      event: 'refund.requested',
      refundRequestId: 'rr_live_1',
      transactionId: 'tx_live_1',
      sellerId: SELLER_ID,
      reason: 'not what I asked for',
      requestedAt: new Date().toISOString(),
    });
    // Published after A's: once B has it, B would have had A's before it.
    const paidB = await publish(
      h.bus,
      'payment.confirmed',
      'escrow-ledger',
      paymentConfirmed(OTHER_SELLER_ID),
    );
    await waitFor(() => sellerEvents(sellerB).length >= 1, { message: 'B hears its payment' });
    await waitFor(() => sellerEvents(sellerA).length >= 2, { message: 'A hears its payment and request' });

    expect(sellerEvents(sellerA)).toEqual([
      expect.objectContaining({ eventId: paidA, eventType: 'payment.confirmed' }),
      expect.objectContaining({ eventId: refundA, eventType: 'refund.requested' }),
    ]);
    expect(sellerEvents(sellerB)).toEqual([
      {
        type: 'seller_event',
        eventId: paidB,
        eventType: 'payment.confirmed',
        occurredAt: expect.any(String),
      },
    ]);
    // A widget's socket hears sessions, never a seller's account.
    expect(sellerEvents(widget)).toEqual([]);
  });

  it('tells the seller of each webhook delivery attempt', async () => {
    const sellerA = await open();
    sellerA.send({ type: 'authenticate', token: SESSION_TOKEN_A });
    await waitFor(() => sellerA.messages.some((m) => m.type === 'authenticated'), { message: 'A signed in' });
    await publish(h.bus, 'seller.updated', 'registry', sellerUpdated({ webhookUrl: h.receiver.url }));
    // The seller.updated nudge itself reaches the dashboard (its settings changed).
    await waitFor(() => sellerEvents(sellerA).some((m) => m.eventType === 'seller.updated'), {
      message: 'settings change heard',
    });
    // The webhook settings are projected by a durable consumer: a payment becomes a delivery once they are.
    await waitFor(
      async () =>
        (
          await h.db
            .selectFrom('sellers')
            .select('webhook_url')
            .where('seller_id', '=', SELLER_ID)
            .executeTakeFirst()
        )?.webhook_url === h.receiver.url,
      { message: 'webhook URL projected' },
    );
    await publish(h.bus, 'payment.confirmed', 'escrow-ledger', paymentConfirmed(SELLER_ID));
    await waitFor(() => h.receiver.received.length > 0, { message: 'webhook delivered' });
    await waitFor(() => sellerEvents(sellerA).some((m) => m.eventType === 'webhook.delivery_attempted'), {
      message: 'delivery attempt heard',
    });
  });

  it('refuses a token the registry does not know, and a malformed one, and closes the socket', async () => {
    const stranger = await open();
    stranger.send({ type: 'authenticate', token: 'sk_test_nobody_0123456789abcdef' });
    await waitFor(() => stranger.closed !== undefined, { message: 'closed' });
    expect(stranger.closed?.code).toBe(4401);
    expect(stranger.messages).toEqual([expect.objectContaining({ type: 'error', code: 'unauthorized' })]);

    const malformed = await open();
    malformed.send({ type: 'authenticate', token: 42 });
    await waitFor(() => malformed.messages.length === 1, { message: 'answered' });
    expect(malformed.messages[0]).toMatchObject({ type: 'error', code: 'invalid_token' });

    // A signed-in seller socket is not idle (the widget idle timeout is 400 ms here).
    const sellerA = await open();
    sellerA.send({ type: 'authenticate', token: SESSION_TOKEN_A });
    await waitFor(() => sellerA.messages.some((m) => m.type === 'authenticated'), { message: 'A signed in' });
    await publish(h.bus, 'payment.confirmed', 'escrow-ledger', paymentConfirmed(SELLER_ID));
    await waitFor(() => sellerEvents(sellerA).length >= 1, { message: 'still hears after the idle timeout' });
    expect(sellerA.closed).toBeUndefined();
  });
});
