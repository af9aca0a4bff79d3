import { migrateToLatest } from '@paygate/runtime';
import { createTestEnvironment, openSchema, type TestEnvironment } from '@paygate/testing';
import type { Kysely } from 'kysely';
import { type Bus, busMigrations } from '../src';

/** A transfer.observed payload numbered n (its tx hash and block). */
export const transfer = (n: number) => ({
  chainId: 31337,
  network: 'local' as const,
  txHash: `0x${n.toString(16).padStart(64, '0')}`,
  logIndex: 0,
  blockNumber: n,
  blockHash: `0x${'cd'.repeat(32)}`,
  from: `0x${'11'.repeat(20)}`,
  to: `0x${'22'.repeat(20)}`,
  token: `0x${'33'.repeat(20)}`,
  amount: '1.5',
  confirmations: 1,
  observedAt: new Date().toISOString(),
});

export interface BusSuite {
  env: TestEnvironment;
  bus: Bus;
  /** The bus tables and an `effects (event_id, n)` table for handlers to write to. */
  db: Kysely<any>;
  close(): Promise<void>;
}

/** A suite's own namespace and schema on real NATS and Postgres. */
export async function startBusSuite(label: string): Promise<BusSuite> {
  const env = await createTestEnvironment(label);
  const bus = await env.bus();
  const schema = env.schemaFor('bus');
  const db = openSchema(schema);
  await migrateToLatest(db, schema, {
    ...busMigrations,
    '2026-11-22-0100-effects': {
      up: async (d: Kysely<any>) => {
        await d.schema
          .createTable('effects')
          .addColumn('event_id', 'text')
          .addColumn('n', 'integer')
          .execute();
      },
    },
  });
  return {
    env,
    bus,
    db,
    async close() {
      await db.destroy();
      await env.cleanup();
    },
  };
}
