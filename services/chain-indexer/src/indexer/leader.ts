import type { Logger } from '@paygate/telemetry';
import pg from 'pg';

/** One replica scans: a session advisory lock on its own connection, released when a dead leader's one closes. */
export class AdvisoryLeadership {
  private client: pg.Client | undefined;
  private leading = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly lockName: string,
    private readonly logger: Logger,
  ) {}

  /** Tries once to become leader; returns whether this replica leads now. */
  async tryAcquire(): Promise<boolean> {
    if (this.leading) return true;
    try {
      if (!this.client) {
        const client = new pg.Client({ connectionString: this.databaseUrl, connectionTimeoutMillis: 5000 });
        client.on('error', (error) => this.lose(error));
        client.on('end', () => this.lose(new Error('leader connection closed')));
        await client.connect();
        this.client = client;
      }
      const result = await this.client.query<{ locked: boolean }>(
        'select pg_try_advisory_lock(hashtextextended($1, 0)) as locked',
        [this.lockName],
      );
      this.leading = result.rows[0]?.locked === true;
      if (this.leading) this.logger.info({ lock: this.lockName }, 'became leader');
      return this.leading;
    } catch (error) {
      this.lose(error as Error);
      return false;
    }
  }

  /** Ends the connection, and so the lock; without an error it is given up, not lost. */
  private async lose(error?: Error): Promise<void> {
    if (this.leading && error) this.logger.warn({ err: error }, 'lost leadership');
    this.leading = false;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  release(): Promise<void> {
    return this.lose();
  }
}
