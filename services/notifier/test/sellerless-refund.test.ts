import { waitFor } from '@paygate/testing';
import { sql } from 'kysely';
import { type NotifierHarness, startNotifierHarness } from './harness';
import { publish, SELLER_ID, sellerUpdated } from './helpers';

jest.setTimeout(30_000);

const TX = `0x${'5'.repeat(64)}`;

/** A refund of an unmatched transfer (refund.completed without seller) concerns no seller: no webhook. */
describe('notifier: refund.completed without a seller', () => {
  let h: NotifierHarness;

  beforeAll(async () => {
    h = await startNotifierHarness('notifsellerless', {
      settings: { WEBHOOK_TIMEOUT_MS: '3000' },
      secrets: { [SELLER_ID]: { secret: 'whsec_sellerless_0123456789', version: 1 } },
    });
    await publish(h.bus, 'seller.updated', 'registry', sellerUpdated({ webhookUrl: h.receiver.url }));
    await waitFor(
      async () => (await h.db.selectFrom('sellers').selectAll().executeTakeFirst())?.webhook_url,
      {
        message: 'seller projected',
      },
    );
  });

  afterAll(() => h?.stop());

  it('handles it without a delivery, while a seller refund is still delivered', async () => {
    const completed = (refundId: string, sellerId: string | null) => ({
      event: 'refund.completed' as const,
      refundId,
      kind: sellerId ? ('payment' as const) : ('unmatched_transfer' as const),
      transactionId: sellerId ? 'txn_1' : null,
      sellerId,
      refundTxHash: TX,
      amount: '5',
      completedAt: new Date().toISOString(),
    });
    const sellerless = await publish(
      h.bus,
      'refund.completed',
      'settlement',
      completed('rfd_unmatched', null),
    );
    const seller = await publish(h.bus, 'refund.completed', 'settlement', completed('rfd_seller', SELLER_ID));
    await waitFor(() => h.receiver.received.length >= 1, { message: 'seller webhook delivered' });
    await waitFor(
      async () =>
        (await sql`select 1 from inbox where event_id = ${sellerless}`.execute(h.db)).rows.length > 0,
      { message: 'seller-less refund.completed handled (not retried)' },
    );
    const deliveries = await h.db.selectFrom('webhook_deliveries').select('event_id').execute();
    expect(deliveries.map((d) => d.event_id)).toEqual([seller]);
    expect(h.receiver.received).toHaveLength(1);
    expect(JSON.parse(h.receiver.received[0]!.body).data).toMatchObject({ refundId: 'rfd_seller' });
  });
});
