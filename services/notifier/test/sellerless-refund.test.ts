import type { Bus } from '@paygate/bus';
import { createTestEnvironment, openSchema, type TestEnvironment, waitFor } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import { loadConfig, type RunningNotifier, startNotifier } from '../src';
import type { NotifierDatabase } from '../src/db';
import { publish, SELLER_ID, sellerUpdated, serveWebhookSecrets, WebhookReceiver } from './helpers';

jest.setTimeout(30_000);

const TX = `0x${'5'.repeat(64)}`;

/** A refund of an unmatched transfer (refund.completed without seller) concerns no seller: no webhook. */
describe('notifier: refund.completed without a seller', () => {
  let env: TestEnvironment;
  let bus: Bus;
  let receiver: WebhookReceiver;
  let notifier: RunningNotifier;
  let db: Kysely<NotifierDatabase>;

  beforeAll(async () => {
    env = await createTestEnvironment('notifsellerless');
    bus = await env.bus();
    receiver = await new WebhookReceiver().start();
    await serveWebhookSecrets(bus, { [SELLER_ID]: { secret: 'whsec_sellerless_0123456789', version: 1 } });
    notifier = await startNotifier(
      loadConfig(env.envFor('notifier', { WEBHOOK_POLL_INTERVAL_MS: '50', WEBHOOK_TIMEOUT_MS: '3000' })),
    );
    db = openSchema<NotifierDatabase>(env.schemaFor('notifier'));
    await publish(bus, 'seller.updated', 'registry', sellerUpdated({ webhookUrl: receiver.url }));
    await waitFor(async () => (await db.selectFrom('sellers').selectAll().executeTakeFirst())?.webhook_url, {
      message: 'seller projected',
    });
  });

  afterAll(async () => {
    await notifier?.stop();
    await db?.destroy();
    await receiver?.stop();
    await env?.cleanup();
  });

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
    const sellerless = await publish(bus, 'refund.completed', 'settlement', completed('rfd_unmatched', null));
    const seller = await publish(bus, 'refund.completed', 'settlement', completed('rfd_seller', SELLER_ID));
    await waitFor(() => receiver.received.length >= 1, { message: 'seller webhook delivered' });
    await waitFor(
      async () => (await sql`select 1 from inbox where event_id = ${sellerless}`.execute(db)).rows.length > 0,
      { message: 'seller-less refund.completed handled (not retried)' },
    );
    const deliveries = await db.selectFrom('webhook_deliveries').select('event_id').execute();
    expect(deliveries.map((d) => d.event_id)).toEqual([seller]);
    expect(receiver.received).toHaveLength(1);
    expect(JSON.parse(receiver.received[0]!.body).data).toMatchObject({ refundId: 'rfd_seller' });
  });
});
