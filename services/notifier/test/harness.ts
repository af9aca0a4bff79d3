import type { Bus } from '@paygate/bus';
import {
  openSchema,
  type ServiceHarness,
  serveSellersForTests,
  startServiceHarness,
  type TestClock,
} from '@paygate/testing';
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

export interface NotifierHarnessOptions {
  /** Environment variables of the notifier; delivery polls every 50 ms unless they say otherwise. */
  settings?: Record<string, string>;
  /** The registry's webhook-secret RPC: seller id → account secret and version. */
  secrets?: Record<string, { secret: string; version: number }>;
  /** The registry's key resolution: bearer token (API key or session) → seller. */
  sellers?: Parameters<typeof serveSellersForTests>[1];
  /** The notifier's clock; default: real time (leases, timeouts and retries pass on their own). */
  clock?: TestClock;
}

/** A notifier on real Postgres and NATS, with a webhook receiver and the registry's RPCs answered from tables. */
export async function startNotifierHarness(
  label: string,
  options: NotifierHarnessOptions = {},
): Promise<NotifierHarness> {
  let bus: Bus | undefined;
  let receiver: WebhookReceiver | undefined;
  const harness = await startServiceHarness(
    label,
    async ({ env, onStop }) => {
      bus = await env.bus();
      const started = await new WebhookReceiver().start();
      receiver = started;
      onStop(() => started.stop(), 'after');
      const secretServer = await serveWebhookSecrets(bus, options.secrets ?? {});
      onStop(() => secretServer.stop(), 'after');
      const sellerServer = await serveSellersForTests(bus, options.sellers ?? {});
      onStop(() => sellerServer.stop(), 'after');
      const config = loadConfig(
        env.envFor('notifier', { WEBHOOK_POLL_INTERVAL_MS: '50', ...options.settings }),
      );
      return startNotifier(options.clock ? { ...config, now: options.clock.now } : config);
    },
    options.clock ? { clock: options.clock } : {},
  );
  const db = openSchema<NotifierDatabase>(harness.env.schemaFor('notifier'));
  harness.onStop(() => db.destroy());
  return { ...harness, bus: bus!, receiver: receiver!, db };
}
