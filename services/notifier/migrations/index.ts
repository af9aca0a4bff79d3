import type { Migration } from 'kysely';
import { notifierInit } from './2026-11-22-0700-notifier-init';
import { webhookEndpoints } from './2026-11-26-0100-webhook-endpoints';
import { rateLimitWindows } from './2026-11-29-0100-rate-limit-windows';
import { webhookFairness } from './2026-12-02-0400-webhook-fairness';
import { webhookTrace } from './2026-12-02-0810-webhook-trace';

/** Frozen, date-prefixed migrations of the notifier schema. They never import application code. */
export const migrations: Record<string, Migration> = {
  '2026-11-22-0700-notifier-init': notifierInit,
  '2026-11-26-0100-webhook-endpoints': webhookEndpoints,
  '2026-11-29-0100-rate-limit-windows': rateLimitWindows,
  '2026-12-02-0400-webhook-fairness': webhookFairness,
  '2026-12-02-0810-webhook-trace': webhookTrace,
};
