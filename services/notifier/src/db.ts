import type { BusTables } from '@paygate/bus';
import type { ColumnType, Generated, Kysely, Transaction } from 'kysely';

type Timestamp = ColumnType<Date, Date | string, Date | string>;

interface SessionsTable {
  session_id: string;
  seller_id: string;
  status: string;
  snapshot: ColumnType<unknown, string, string>;
  updated_at: Timestamp;
}

export interface SellersTable {
  seller_id: string;
  revision: number;
  webhook_url: string | null;
  webhook_secret_version: number;
  updated_at: Timestamp;
}

interface WebhookEventsTable {
  event_id: string;
  seller_id: string;
  event_type: string;
  body: string;
  created_at: Timestamp;
  /** The trace context the event was recorded in: its deliveries' spans continue it. */
  traceparent: ColumnType<string | null, string | null | undefined, string | null>;
}

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;

export interface WebhookDeliveriesTable {
  delivery_id: string;
  event_id: string;
  seller_id: string;
  url: string;
  status: (typeof DELIVERY_STATUSES)[number];
  attempt_count: Generated<number>;
  next_attempt_at: Timestamp | null;
  give_up_at: Timestamp;
  last_status_code: number | null;
  last_error: string | null;
  redelivery_of: string | null;
  created_at: Timestamp;
  delivered_at: Timestamp | null;
  /** The endpoint it goes to; null: the account's webhook URL. */
  endpoint_id: Generated<string | null>;
  /** Set while a replica sends it (claim lease): what a seller and a target have in flight is counted from it. */
  leased_until: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

export const CIRCUIT_STATES = ['closed', 'open', 'half_open'] as const;

/** The breaker of one webhook target: an endpoint, or '' for the account's webhook URL. */
export interface WebhookCircuitsTable {
  seller_id: string;
  target: string;
  state: (typeof CIRCUIT_STATES)[number];
  consecutive_failures: number;
  /** Times opened since it last closed: the cooldown doubles with each. */
  open_count: Generated<number>;
  opened_at: Timestamp | null;
  /** Open: no delivery is sent before this; then one probe. Null when closed. */
  retry_at: Timestamp | null;
  /** Half-open: the probe's lease; no other delivery is sent until it is answered or this passes. */
  probe_until: Timestamp | null;
  last_error: string | null;
  updated_at: Timestamp;
}

export interface WebhookEndpointsTable {
  endpoint_id: string;
  seller_id: string;
  url: string;
  description: Generated<string>;
  events: string[];
  enabled: Generated<boolean>;
  /** Part of the derivation of its signing secret: a rotation is a new version. */
  secret_version: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
  deleted_at: Timestamp | null;
}

export type AttemptOutcome = 'delivered' | 'retryable' | 'permanent';

export interface WebhookAttemptsTable {
  delivery_id: string;
  attempt_number: number;
  attempted_at: Timestamp;
  duration_ms: number;
  status_code: number | null;
  outcome: AttemptOutcome;
  error: string | null;
  response_excerpt: string | null;
}

interface IdempotencyKeysTable {
  seller_id: string;
  idempotency_key: string;
  request_hash: string;
  response_status: number;
  response_body: ColumnType<unknown, string, string>;
  created_at: Generated<Date>;
}

/** The service's tables, with the bus's own (outbox, inbox) that every schema has. */
export interface NotifierDatabase extends BusTables {
  sessions: SessionsTable;
  sellers: SellersTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  webhook_endpoints: WebhookEndpointsTable;
  idempotency_keys: IdempotencyKeysTable;
  webhook_circuits: WebhookCircuitsTable;
}

/** The pool or a transaction on it: what reads and single writes run on. */
export type NotifierDb = Kysely<NotifierDatabase> | Transaction<NotifierDatabase>;
