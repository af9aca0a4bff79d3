/**
 * Which schemas and event streams a `make dev` system owns, and the lock that keeps a second system off them.
 *
 * Every run drops its schemas and streams first (its chain is new), so two systems on the same names would break
 * each other: the first one's services would go on writing into the second's fresh tables, against another chain.
 * Each DEV_PORT_OFFSET therefore has its own names (0: dev_* and dev, 1000: dev1000_* and dev1000), and a run holds
 * a Postgres advisory lock on its names for its whole life: a second run on the same names refuses to start.
 */
import pg from 'pg';

export interface DevSystem {
  /** Added to every port the system opens (edge, services, demo, chain). */
  portOffset: number;
  /** The event namespace (streams `<namespace>_…`, and subjects), DEV_NAMESPACE or derived from the offset. */
  namespace: string;
  /** Prefix of every service's schema, DEV_SCHEMA_PREFIX or derived from the offset. */
  schemaPrefix: string;
}

/** The highest offset that still leaves the highest base port (9xxx) a valid port. */
const MAX_PORT_OFFSET = 55_000;
/** Short enough that the prefix and the longest schema name (settlement) stay within Postgres's 63 characters. */
const SCHEMA_PREFIX_RULE = /^[a-z_][a-z0-9_]{0,39}$/;
/** As libs/bus accepts a namespace. */
const NAMESPACE_RULE = /^[a-z][a-z0-9_-]{0,40}$/;

/** The system's names from the environment: DEV_PORT_OFFSET, and DEV_NAMESPACE / DEV_SCHEMA_PREFIX when set. */
export function devSystem(env: NodeJS.ProcessEnv = process.env): DevSystem {
  const rawOffset = (env.DEV_PORT_OFFSET ?? '').trim() || '0';
  const portOffset = /^\d{1,5}$/.test(rawOffset) ? Number(rawOffset) : Number.NaN;
  if (!(portOffset <= MAX_PORT_OFFSET)) {
    throw new Error(
      `DEV_PORT_OFFSET must be a whole number from 0 to ${MAX_PORT_OFFSET} (added to every port), got "${env.DEV_PORT_OFFSET}"`,
    );
  }
  const own = portOffset === 0 ? 'dev' : `dev${portOffset}`;
  const namespace = env.DEV_NAMESPACE || own;
  const schemaPrefix = env.DEV_SCHEMA_PREFIX || `${own}_`;
  if (!NAMESPACE_RULE.test(namespace)) {
    throw new Error(
      `DEV_NAMESPACE must be a lowercase letter, then up to 40 lowercase letters, digits, _ or -, got "${namespace}"`,
    );
  }
  if (!SCHEMA_PREFIX_RULE.test(schemaPrefix)) {
    throw new Error(
      `DEV_SCHEMA_PREFIX must be a lowercase letter or _, then up to 39 lowercase letters, digits or _, got "${schemaPrefix}"`,
    );
  }
  return { portOffset, namespace, schemaPrefix };
}

/** A second system on names that a running one holds. */
export class DevSystemInUseError extends Error {
  override readonly name = 'DevSystemInUseError';
}

export interface DevSystemLock {
  /** Lets another system take these names (ends the connection that holds the lock). */
  release(): Promise<void>;
}

/** The advisory lock keys of a system's names: one for its schemas, one for its event streams. */
function lockKeys(
  system: Pick<DevSystem, 'namespace' | 'schemaPrefix'>,
): Array<{ key: string; what: string }> {
  return [
    { key: `paygate make dev schemas ${system.schemaPrefix}`, what: `the schemas ${system.schemaPrefix}*` },
    { key: `paygate make dev events ${system.namespace}`, what: `the event namespace ${system.namespace}` },
  ];
}

/**
 * Takes this system's names for as long as the returned lock is held: a session advisory lock per name, on a
 * connection of its own (the lock goes when the connection does, so a crashed run leaves nothing behind). Throws
 * DevSystemInUseError, naming the names, who holds them and how to choose others, when another system holds one.
 */
export async function lockDevSystem(
  databaseUrl: string,
  system: Pick<DevSystem, 'namespace' | 'schemaPrefix'>,
  options: { holder: string; log?: (line: string) => void },
): Promise<DevSystemLock> {
  const client = new pg.Client({
    connectionString: databaseUrl,
    connectionTimeoutMillis: 5000,
    statement_timeout: 5000,
    keepAlive: true,
    application_name: options.holder.slice(0, 63),
  });
  let released = false;
  client.on('error', (error) => {
    if (!released)
      options.log?.(`warning: lost the Postgres connection holding this system's names: ${error.message}`);
  });
  await client.connect();
  try {
    for (const { key, what } of lockKeys(system)) {
      const { rows } = await client.query<{ locked: boolean }>(
        'select pg_try_advisory_lock(hashtextextended($1, 0)) as locked',
        [key],
      );
      if (rows[0]?.locked) continue;
      const holder = await client.query<{ pid: number; application_name: string }>(
        `select a.pid, a.application_name from pg_locks l join pg_stat_activity a on a.pid = l.pid
         where l.locktype = 'advisory' and l.granted and l.objsubid = 1
           and l.database = (select oid from pg_database where datname = current_database())
           and ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended($1, 0)`,
        [key],
      );
      const by = holder.rows[0];
      const heldBy = by ? ` (held by "${by.application_name || 'unnamed'}", Postgres pid ${by.pid})` : '';
      throw new DevSystemInUseError(
        `another make dev is running on ${what} in this Postgres${heldBy}, and each run drops its schemas and ` +
          'streams at start: stop that one (Ctrl-C), or run this one beside it with another DEV_PORT_OFFSET (each ' +
          'offset has its own schemas and streams: 1000 gives dev1000_* and dev1000), or choose names with ' +
          'DEV_SCHEMA_PREFIX and DEV_NAMESPACE',
      );
    }
  } catch (error) {
    released = true;
    await client.end().catch(() => undefined);
    throw error;
  }
  return {
    async release() {
      if (released) return;
      released = true;
      await client.end().catch(() => undefined);
    },
  };
}
