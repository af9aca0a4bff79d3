import type { ColumnType, Generated } from 'kysely';

export interface OutboxTable {
  id: string;
  subject: string;
  envelope: ColumnType<unknown, string, string>;
  created_at: Generated<Date>;
  published_at: Date | null;
  attempts: Generated<number>;
}

export interface InboxTable {
  consumer: string;
  event_id: string;
  processed_at: Generated<Date>;
}

/** The tables the bus keeps inside each service's own schema. */
export interface BusTables {
  outbox: OutboxTable;
  inbox: InboxTable;
}
