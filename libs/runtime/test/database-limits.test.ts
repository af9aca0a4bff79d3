/**
 * Every wait on Postgres is bounded: each connection of a service's pool carries statement_timeout, lock_timeout
 * and idle_in_transaction_session_timeout (defaults, or DB_* settings), and a setting that would mean "no limit"
 * (0) or is out of range is refused at start-up. A lock held by another session ends the waiting statement after
 * lock_timeout instead of stalling the pool.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { TEST_DATABASE_URL } from '@paygate/testing';
import { sql } from 'kysely';
import pg from 'pg';
import { commonConfig, createDatabase, DEFAULT_DATABASE_LIMITS } from '../src';

const defaults = { serviceName: 'limits-test', schema: 'public', port: 0 };

describe('Postgres limits of every service', () => {
  it('reads DB_* settings, bounded, with defaults', () => {
    expect(commonConfig({}, defaults).database).toEqual(DEFAULT_DATABASE_LIMITS);
    expect(commonConfig({ DB_LOCK_TIMEOUT_MS: '2500', DB_POOL_SIZE: '4' }, defaults).database).toMatchObject({
      lockTimeoutMs: 2500,
      poolSize: 4,
    });
    expect(() => commonConfig({ DB_LOCK_TIMEOUT_MS: '0' }, defaults)).toThrow(
      'DB_LOCK_TIMEOUT_MS: must be an integer from 100 to 600000',
    );
    expect(() => commonConfig({ DB_STATEMENT_TIMEOUT_MS: '0' }, defaults)).toThrow('DB_STATEMENT_TIMEOUT_MS');
    expect(() => commonConfig({ DB_POOL_SIZE: '0' }, defaults)).toThrow('DB_POOL_SIZE');
    expect(() => commonConfig({ NATS_STREAM_REPLICAS: '7' }, defaults)).toThrow('NATS_STREAM_REPLICAS');
  });

  it('sets the timeouts on every connection, and a lock wait ends after lock_timeout', async () => {
    const db = createDatabase<any>({ url: TEST_DATABASE_URL, schema: 'public', lockTimeoutMs: 300 });
    const holder = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await holder.connect();
    try {
      const shown = await sql<{
        s: string;
        l: string;
        i: string;
      }>`select current_setting('statement_timeout') as s,
          current_setting('lock_timeout') as l, current_setting('idle_in_transaction_session_timeout') as i`.execute(
        db,
      );
      expect(shown.rows[0]).toEqual({ s: '15s', l: '300ms', i: '1min' });

      const key = Math.floor(Math.random() * 1e9);
      await holder.query('select pg_advisory_lock($1)', [key]);
      const started = Date.now();
      await expect(sql`select pg_advisory_lock(${key})`.execute(db)).rejects.toThrow(/lock timeout/);
      expect(Date.now() - started).toBeLessThan(5000);
      await holder.query('select pg_advisory_unlock($1)', [key]);
    } finally {
      await holder.end();
      await db.destroy();
    }
  });

  it('survives a backend ended under a transaction between two statements (the service process stays up)', () => {
    const run = spawnSync(
      process.execPath,
      ['--import', 'tsx', path.join(__dirname, 'fixtures/terminated-in-transaction.ts')],
      { env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL }, encoding: 'utf8', timeout: 60_000 },
    );
    expect({ status: run.status, stderr: run.stderr.slice(-1500) }).toEqual({ status: 0, stderr: '' });
    expect(run.stdout).toMatch(/transaction failed: .*; next query ok; survived/);
  }, 90_000);
});
