import type { Bus } from '@paygate/bus';
import { openSchema, type ServiceHarness, startServiceHarness } from '@paygate/testing';
import type { Kysely } from 'kysely';
import { loadConfig, type RunningNotifier, startNotifier } from '../src';
import type { NotifierDatabase } from '../src/db';
import { serveWebhookSecrets, WebhookReceiver } from './helpers';

export interface NotifierHarness extends ServiceHarness<RunningNotifier> {
  bus: Bus;
  /** A seller's webhook endpoint: records each request, answers 200 unless told otherwise. */
  receiver: WebhookReceiver;
  /** The notifier's schema, for assertions on what it stored. */
  db: Kysely<NotifierDatabase>;
}

/**
 * A notifier on real Postgres and NATS, with a webhook receiver and the registry's webhook-secret RPC answered from
 * `secrets` (seller id → account secret and version). Delivery polls every 50 ms unless `settings` say otherwise.
 */
export async function startNotifierHarness(
  label: string,
  settings: Record<string, string> = {},
  secrets: Record<string, { secret: string; version: number }> = {},
): Promise<NotifierHarness> {
  let bus: Bus | undefined;
  let receiver: WebhookReceiver | undefined;
  const harness = await startServiceHarness(label, async ({ env, onStop }) => {
    bus = await env.bus();
    const started = await new WebhookReceiver().start();
    receiver = started;
    onStop(() => started.stop(), 'after');
    const secretServer = await serveWebhookSecrets(bus, secrets);
    onStop(() => secretServer.stop(), 'after');
    return startNotifier(loadConfig(env.envFor('notifier', { WEBHOOK_POLL_INTERVAL_MS: '50', ...settings })));
  });
  const db = openSchema<NotifierDatabase>(harness.env.schemaFor('notifier'));
  harness.onStop(() => db.destroy());
  return { ...harness, bus: bus!, receiver: receiver!, db };
}
