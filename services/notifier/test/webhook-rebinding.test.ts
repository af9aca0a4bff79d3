import type { Bus } from '@paygate/bus';
import type { HostResolver } from '@paygate/net';
import {
  createTestEnvironment,
  openSchema,
  TestClock,
  type TestEnvironment,
  waitFor,
} from '@paygate/testing';
import type { Kysely } from 'kysely';
import { loadConfig, type RunningNotifier, startNotifier } from '../src';
import type { NotifierDatabase } from '../src/db';
import { publish, SELLER_ID, sellerUpdated, serveWebhookSecrets, WebhookReceiver } from './helpers';

jest.setTimeout(30_000);

/** The seller's DNS: its webhook host resolves to this machine (as after a rebinding). */
const dns: HostResolver = async (host) => {
  if (host === 'hooks.rebind.test') return ['127.0.0.1'];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
};

/** Webhook deliveries check the address they connect to, not only the URL registered. */
describe('notifier: webhook to a host that resolves to loopback', () => {
  let env: TestEnvironment;
  let bus: Bus;
  let receiver: WebhookReceiver;
  let notifier: RunningNotifier;
  let db: Kysely<NotifierDatabase>;
  const clock = new TestClock('2026-11-22T12:00:00.000Z');
  const start = (production: boolean) =>
    startNotifier(
      {
        ...loadConfig(env.envFor('notifier', { WEBHOOK_POLL_INTERVAL_MS: '50', WEBHOOK_TIMEOUT_MS: '3000' })),
        production,
        now: clock.now,
      },
      { random: () => 1, resolveHost: dns },
    );

  beforeAll(async () => {
    env = await createTestEnvironment('notifrebind');
    bus = await env.bus();
    receiver = await new WebhookReceiver().start();
    await serveWebhookSecrets(bus, { [SELLER_ID]: { secret: 'whsec_rebind_0123456789', version: 1 } });
    db = openSchema<NotifierDatabase>(env.schemaFor('notifier'));
  });

  afterAll(async () => {
    await notifier?.stop();
    await db?.destroy();
    await receiver?.stop();
    await env?.cleanup();
  });

  it('is refused at connect time in production, and delivered in development', async () => {
    notifier = await start(true);
    const webhookUrl = receiver.url.replace('127.0.0.1', 'hooks.rebind.test');
    await publish(bus, 'seller.updated', 'registry', sellerUpdated({ webhookUrl }));
    await waitFor(async () => (await db.selectFrom('sellers').selectAll().executeTakeFirst())?.webhook_url, {
      message: 'seller projected',
    });
    const eventId = await publish(bus, 'refund.requested', 'escrow-ledger', {
      event: 'refund.requested',
      refundRequestId: 'rr_rebind',
      transactionId: 'tx_rebind',
      sellerId: SELLER_ID,
      reason: 'never arrived',
      requestedAt: clock.now().toISOString(),
    });
    const delivery = () =>
      db.selectFrom('webhook_deliveries').selectAll().where('event_id', '=', eventId).executeTakeFirst();
    const refused = await waitFor(
      async () => ((await delivery())?.attempt_count === 1 ? delivery() : undefined),
      {
        message: 'first attempt',
      },
    );
    expect(refused).toMatchObject({
      status: 'pending',
      last_status_code: null,
      last_error:
        'network error: refused to connect to hooks.rebind.test: it resolves to 127.0.0.1, a loopback, private, link-local or reserved address (production rule, checked at connect time)',
    });
    expect(receiver.received).toHaveLength(0);

    // The same delivery, retried by a development notifier (same DNS answer), reaches the receiver.
    await notifier.stop();
    clock.set(refused!.next_attempt_at!.getTime());
    notifier = await start(false);
    await waitFor(async () => (await delivery())?.status === 'delivered', {
      message: 'delivered in development',
    });
    expect(receiver.received).toHaveLength(1);
    expect(JSON.parse(receiver.received[0]!.body)).toMatchObject({
      event: 'refund.requested',
      transactionId: 'tx_rebind',
    });
  });
});
