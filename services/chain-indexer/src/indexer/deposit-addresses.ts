import { type DeclaredConsumer, defineConsumer } from '@paygate/bus';
import type { TransferLog } from '@paygate/chain';
import type { Kysely, Transaction } from 'kysely';
import type { ChainIndexerConfig } from '../config';
import type { IndexerDatabase } from './tables';

/** An assignment consumed this much later than it was made counts as late: its backfill searches by time. */
const LATE_REGISTRATION_MS = 60_000;
/** Block timestamps and checkout's clock may disagree by this much; the time search starts this much earlier. */
const CLOCK_SKEW_SECONDS = 300;
/** Addresses per lookup query (a bound on its parameter list). */
const LOOKUP_BATCH = 5_000;

/** `deposit.address_assigned` → a watched address, in the table (survives restarts); idempotent on the address. */
export function depositAddressConsumer(
  config: Pick<ChainIndexerConfig, 'chainId'>,
): DeclaredConsumer<IndexerDatabase> {
  return defineConsumer<'deposit.address_assigned', IndexerDatabase>({
    durable: 'indexer-deposit-addresses',
    subject: 'deposit.address_assigned',
    concurrency: 4,
    async handler(trx, event) {
      const d = event.data;
      if (d.chainId !== config.chainId) return; // another chain's checkout: not ours to watch
      await trx
        .insertInto('deposit_addresses')
        .values((eb) => ({
          address: d.address.toLowerCase(),
          derivation_index: BigInt(d.derivationIndex),
          session_id: d.sessionId,
          assigned_at: new Date(d.assignedAt),
          watch_until: new Date(d.watchUntil),
          // Where the scanner is now: it scans on without this address until the address is backfilled.
          registered_block: eb
            .selectFrom('cursors')
            .select('next_block')
            .where('chain_id', '=', config.chainId),
        }))
        .onConflict((oc) => oc.column('address').doNothing())
        .execute();
    },
  });
}

interface PendingBackfill {
  addresses: string[];
  /** The earliest assignment among them (seconds since epoch), when one was registered late; else null. */
  lateSinceSeconds: number | null;
  /** The lowest cursor at which one was registered: scanned without them from there, so backfilled from there. */
  registeredBlock: number | null;
}

/** What the scanner asks about deposit addresses: which to watch, which to backfill, which are Paygate's. */
export class DepositAddressBook {
  constructor(
    private readonly db: Kysely<IndexerDatabase>,
    private readonly config: Pick<ChainIndexerConfig, 'maxWatchedDepositAddresses' | 'watchedAddresses'>,
  ) {}

  /** The watched addresses, or `'every-transfer'` past the cap (a capped subset would miss payments). */
  async watched(now: Date): Promise<string[] | 'every-transfer'> {
    const rows = await this.watchedAt(now)
      .limit(this.config.maxWatchedDepositAddresses + 1)
      .execute();
    if (rows.length > this.config.maxWatchedDepositAddresses) return 'every-transfer';
    return rows.map((r) => r.address);
  }

  /** Those of `recipients` (lower case) that are deposit addresses watched now, by primary-key lookups in batches. */
  async watchedAmong(recipients: readonly string[], now: Date): Promise<string[]> {
    const distinct = [...new Set(recipients)];
    const found: string[] = [];
    for (let i = 0; i < distinct.length; i += LOOKUP_BATCH) {
      const rows = await this.watchedAt(now)
        .where('address', 'in', distinct.slice(i, i + LOOKUP_BATCH))
        .execute();
      for (const row of rows) found.push(row.address);
    }
    return found;
  }

  /** Up to `limit` watched addresses after `after` (keyset paging: none skipped or read twice). */
  async watchedPage(now: Date, after: string, limit: number): Promise<string[]> {
    const rows = await this.watchedAt(now)
      .where('address', '>', after)
      .orderBy('address')
      .limit(limit)
      .execute();
    return rows.map((r) => r.address);
  }

  /** Deposit addresses watched at `now`: their watch ahead, and backfilled. */
  private watchedAt(now: Date) {
    return this.db
      .selectFrom('deposit_addresses')
      .select('address')
      .where('watch_until', '>', now)
      .where('backfilled', '=', true);
  }

  /** Registered addresses not backfilled yet (a bounded batch). */
  async pendingBackfill(limit: number): Promise<PendingBackfill> {
    const rows = await this.db
      .selectFrom('deposit_addresses')
      .select(['address', 'assigned_at', 'registered_at', 'registered_block'])
      .where('backfilled', '=', false)
      .orderBy('assigned_at')
      .limit(limit)
      .execute();
    const late = rows.filter(
      (r) => r.registered_at.getTime() - r.assigned_at.getTime() > LATE_REGISTRATION_MS,
    );
    const earliest = late.length > 0 ? Math.min(...late.map((r) => r.assigned_at.getTime())) : null;
    const blocks = rows.flatMap((r) => (r.registered_block === null ? [] : [Number(r.registered_block)]));
    return {
      addresses: rows.map((r) => r.address),
      lateSinceSeconds: earliest === null ? null : Math.floor(earliest / 1000) - CLOCK_SKEW_SECONDS,
      registeredBlock: blocks.length > 0 ? Math.min(...blocks) : null,
    };
  }

  async markBackfilled(trx: Transaction<IndexerDatabase>, addresses: string[]): Promise<void> {
    if (addresses.length === 0) return;
    await trx
      .updateTable('deposit_addresses')
      .set({ backfilled: true })
      .where('address', 'in', addresses)
      .execute();
  }

  /** Drops moves between Paygate's own wallets (a sweep into escrow was booked when it reached the deposit address). */
  async withoutInternalMoves(
    logs: TransferLog[],
    depositAddresses: readonly string[],
  ): Promise<TransferLog[]> {
    if (logs.length === 0) return logs;
    const fixed = new Set(this.config.watchedAddresses.map((a) => a.toLowerCase()));
    const known = new Set(depositAddresses);
    const senders = [...new Set(logs.map((l) => l.from.toLowerCase()))].filter(
      (a) => !fixed.has(a) && !known.has(a),
    );
    if (senders.length > 0) {
      const rows = await this.db
        .selectFrom('deposit_addresses')
        .select('address')
        .where('address', 'in', senders)
        .execute();
      for (const row of rows) known.add(row.address);
    }
    const ours = (a: string) => fixed.has(a.toLowerCase()) || known.has(a.toLowerCase());
    return logs.filter((log) => !(ours(log.from) && ours(log.to)));
  }
}
