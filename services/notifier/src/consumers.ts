import { type ConsumerOptions, consumersOf, type DeclaredConsumer } from '@paygate/bus';
import type { EventEnvelope, Subject } from '@paygate/contracts';
import type { Transaction } from 'kysely';
import type { NotifierConfig } from './config';
import type { NotifierDatabase } from './db';
import { findSeller, upsertSeller } from './sellers/repository';
import { type CheckoutSessionSnapshot, upsertSession } from './sessions/repository';
import type { WebhookDispatcher } from './webhooks/dispatcher';
import { endpointsFor } from './webhooks/endpoint-store';
import { buildWebhookBody, WEBHOOK_EVENT_TYPES, type WebhookEventType } from './webhooks/payload';
import { createDelivery } from './webhooks/repository';

/** Durable consumer names: one per subject (nats 2.9 allows one filter subject per consumer). */
const durableFor = (subject: Subject) => `notifier_${subject.replace(/[^a-z0-9]/g, '_')}`;

/** In the consumer's transaction (the inbox makes a redelivery a no-op): the body, a delivery per target. */
async function enqueueWebhook(
  trx: Transaction<NotifierDatabase>,
  envelope: EventEnvelope<WebhookEventType, { sellerId: string | null }>,
  config: NotifierConfig,
): Promise<void> {
  const sellerId = envelope.data.sellerId;
  // No seller: a refund.completed of an unmatched transfer (money that paid no seller) concerns nobody's webhook.
  if (!sellerId) return;
  const seller = await findSeller(trx, sellerId);
  const endpoints = await endpointsFor(trx, sellerId, envelope.type);
  if (!seller?.webhook_url && endpoints.length === 0) return;
  const delivery = {
    eventId: envelope.id,
    eventType: envelope.type,
    sellerId,
    body: buildWebhookBody(envelope),
    now: config.now(),
    retryWindowHours: config.webhookRetryWindowHours,
  };
  if (seller?.webhook_url) await createDelivery(trx, { ...delivery, url: seller.webhook_url });
  for (const endpoint of endpoints)
    await createDelivery(trx, { ...delivery, url: endpoint.url, endpointId: endpoint.endpoint_id });
}

export function notifierConsumers(deps: {
  config: NotifierConfig;
  dispatcher: WebhookDispatcher;
}): DeclaredConsumer<NotifierDatabase>[] {
  const { config, dispatcher } = deps;
  const consumer = consumersOf<NotifierDatabase>();
  const webhookConsumers = WEBHOOK_EVENT_TYPES.map(
    (subject): ConsumerOptions<WebhookEventType, NotifierDatabase> => ({
      durable: durableFor(subject),
      subject,
      concurrency: 4,
      handler: async (trx, event) => {
        if (event.type.startsWith('checkout.session_'))
          await upsertSession(trx, event.data as CheckoutSessionSnapshot);
        await enqueueWebhook(
          trx,
          event as EventEnvelope<WebhookEventType, { sellerId: string | null }>,
          config,
        );
      },
      afterCommit: () => dispatcher.kick(),
    }),
  );
  return [
    consumer({
      durable: durableFor('seller.updated'),
      subject: 'seller.updated',
      handler: async (trx, event) => upsertSeller(trx, event.data),
    }),
    ...webhookConsumers.map(consumer),
  ];
}
