import { streamNames } from '@paygate/bus';
import { connect } from 'nats';
import pg from 'pg';
import type { Infrastructure } from './infrastructure';

/** Drops the dev_ schemas and the dev event streams, so a new local chain starts with matching state. */
export async function resetDevState(
  infra: Infrastructure,
  namespace: string,
  schemas: string[],
): Promise<string[]> {
  const client = new pg.Client({ connectionString: infra.databaseUrl, connectionTimeoutMillis: 5000 });
  await client.connect();
  const dropped: string[] = [];
  try {
    for (const schema of schemas) {
      await client.query(`drop schema if exists "dev_${schema}" cascade`);
      dropped.push(`dev_${schema}`);
    }
  } finally {
    await client.end();
  }
  const nc = await connect({ servers: infra.natsUrl, timeout: 5000 });
  try {
    const jsm = await nc.jetstreamManager();
    const { eventsStream, deadLetterStream } = streamNames(namespace);
    for (const stream of [eventsStream, deadLetterStream])
      await jsm.streams.delete(stream).catch(() => undefined);
  } finally {
    await nc.close();
  }
  return dropped;
}
