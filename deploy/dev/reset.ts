import { streamNames } from '@paygate/bus';
import { connect } from 'nats';
import pg from 'pg';
import { type Infrastructure, natsAdminOptions } from './infrastructure';

/**
 * Drops the dev schemas and the dev event streams (with their durable consumers), so the services of a new
 * local chain start with matching state: migrations from scratch, no skills, no indexer cursor, no settlement
 * nonces, no payment claims of the previous chain (the demo's deterministic keys repeat its tx hashes).
 */
export async function resetDevState(
  infra: Pick<Infrastructure, 'databaseUrl' | 'natsUrl' | 'natsPasswords'>,
  namespace: string,
  schemas: readonly string[],
): Promise<void> {
  const client = new pg.Client({ connectionString: infra.databaseUrl, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    for (const schema of schemas) {
      if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new Error(`not a dev schema name: ${schema}`);
      await client.query(`drop schema if exists "${schema}" cascade`);
    }
  } finally {
    await client.end();
  }
  const nc = await connect({ servers: infra.natsUrl, timeout: 5000, ...natsAdminOptions(infra) });
  try {
    const jsm = await nc.jetstreamManager({ timeout: 5000 });
    const { eventsStream, deadLetterStream } = streamNames(namespace);
    for (const stream of [eventsStream, deadLetterStream])
      await jsm.streams.delete(stream).catch(() => undefined);
  } finally {
    await nc.close();
  }
}
