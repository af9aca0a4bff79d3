import { compareTransferLogs, getTransferLogs, type TransferLog } from '@paygate/chain';
import { type Logger, withSpan } from '@paygate/telemetry';
import type { JsonRpcProvider } from 'ethers';
import { type Insertable, type Kysely, sql, type Transaction } from 'kysely';
import type { ChainIndexerConfig } from '../config';
import { BlockUnavailableError, NodeBehindError } from '../errors';
import { DepositAddressBook } from './deposit-addresses';
import { EveryTransferReader } from './every-transfer';
import { publishConfirmedTransfers } from './publish';
import { canonicalAncestor, olderKnownBlocks, rollBackAbove, storedRecentBlocks } from './reorg';
import type { IndexerDatabase } from './tables';

/** Deposit addresses backfilled per pass at most. */
const BACKFILL_BATCH = 500;

interface PassResult {
  head: number;
  scannedTo: number;
  observed: number;
  published: number;
  reorged: number;
}

/** Stores transfers as pending; a reversed one whose block came back (A, B, then A again) is published again. */
export async function insertTransfers(
  trx: Transaction<IndexerDatabase>,
  rows: Insertable<IndexerDatabase['transfers']>[],
): Promise<void> {
  await trx
    .insertInto('transfers')
    .values(rows)
    .onConflict((oc) =>
      oc
        .columns(['chain_id', 'block_hash', 'tx_hash', 'log_index'])
        .doUpdateSet({ status: 'pending', published_at: null, reorged_at: null })
        .where('transfers.status', '=', 'reorged'),
    )
    .execute();
}

interface HashedBlock {
  number: number;
  hash: string;
}

/** A reorg rolled back; `not_undone`: no known block is canonical (those below rolledBackTo unchecked). */
export interface ReorgReport {
  depth: number;
  reach: 'within_confirmations' | 'past_confirmations' | 'past_window' | 'not_undone';
  fromBlock: number;
  rolledBackTo: number;
  reorged: number;
}

/** What the operator is told of a reorg that reached reported transfers; one within confirmations is only a warning. */
const REORG_ALARMS: Partial<Record<ReorgReport['reach'], string>> = {
  not_undone:
    'reorg deeper than every block the indexer knows: reported transfers below rolledBackTo were not checked; reconcile the ledger with the chain',
  past_window: 'reorg deeper than REORG_WINDOW_BLOCKS; undone from older known blocks',
  past_confirmations: 'reorg deeper than CONFIRMATIONS: reported transfers left the chain and are reversed',
};

/** The logs whose block is not known under another hash. */
const onKnownChain = (logs: TransferLog[], hashes: Map<number, string>) =>
  logs.filter((log) => (hashes.get(log.blockNumber) ?? log.blockHash) === log.blockHash);

/** The chain reads one pass needs; an ethers provider satisfies it. */
type ChainReader = Pick<JsonRpcProvider, 'getBlock' | 'getLogs'>;

/** A leader pass: roll back a reorg, backfill deposit addresses, store new transfers, publish confirmed. */
export class TransferScanner {
  private readonly deposits: DepositAddressBook;
  private readonly everyTransfer: EveryTransferReader;
  /** The newest block stored, with its hash as the chain had it at the end of the last complete pass. */
  private settledTip: HashedBlock | undefined;

  constructor(
    private readonly db: Kysely<IndexerDatabase>,
    private readonly provider: ChainReader,
    private readonly config: ChainIndexerConfig,
    private readonly logger: Logger,
    /** Hears of every reorg rolled back (the service's metrics). */
    private readonly onReorg: (report: ReorgReport) => void,
  ) {
    this.deposits = new DepositAddressBook(db, config);
    this.everyTransfer = new EveryTransferReader(provider, this.deposits, config, logger);
  }

  private get chainId(): number {
    return this.config.chainId;
  }

  async runPass(): Promise<PassResult> {
    return withSpan('indexer.pass', {}, async () => {
      const latest = await this.provider.getBlock('latest');
      if (!latest?.hash) throw new BlockUnavailableError('latest');
      const head = latest.number;
      if (this.settledTip?.hash === latest.hash) return this.quietPass(head);
      this.settledTip = undefined;
      const { reorged, verifiedTip } = await this.handleReorg(head);
      await this.backfillNewDepositAddresses();
      const { scannedTo, observed, raced, storedTip } = await this.scan(head);
      // A pass that saw the chain change under it publishes nothing: the next pass's reorg check comes first.
      const published = raced ? 0 : await publishConfirmedTransfers(this.db, this.config, head);
      const tip = storedTip ?? verifiedTip;
      if (!raced && tip?.number === head && tip.hash === latest.hash) this.settledTip = tip;
      return { head, scannedTo, observed, published, reorged };
    });
  }

  /** The tip is unchanged since the last checked pass: only new deposit addresses can bring anything. */
  private async quietPass(head: number): Promise<PassResult> {
    const backfilled = await this.backfillNewDepositAddresses();
    const published = backfilled > 0 ? await publishConfirmedTransfers(this.db, this.config, head) : 0;
    return { head, scannedTo: head, observed: 0, published, reorged: 0 };
  }

  /** After leadership is lost another replica may write: the next pass checks everything again. */
  forgetSettledTip(): void {
    this.settledTip = undefined;
  }

  private async nextBlock(): Promise<number> {
    const row = await this.db
      .selectFrom('cursors')
      .select('next_block')
      .where('chain_id', '=', this.chainId)
      .executeTakeFirst();
    return row ? Number(row.next_block) : this.config.startBlock;
  }

  /** Finds the highest stored block still canonical; everything above it is rolled back. */
  private async handleReorg(head: number): Promise<{ reorged: number; verifiedTip?: HashedBlock }> {
    const stored = await storedRecentBlocks(this.db, this.chainId, this.config.reorgWindowBlocks);
    if (stored.length === 0) return { reorged: 0 };
    const newest = Number(stored[0]!.number);
    if (head < newest) {
      // A lagging node (load-balanced RPC), not a reorg (which replaces blocks): nothing is rolled back.
      throw new NodeBehindError(head, newest);
    }
    let ancestor = await canonicalAncestor(stored, head, this.provider);
    if (ancestor === newest) return { reorged: 0, verifiedTip: { number: newest, hash: stored[0]!.hash } };
    let lowestKnown = Number(stored[stored.length - 1]!.number);
    let reach: ReorgReport['reach'] | undefined;
    if (ancestor === undefined) {
      // Deeper than the window: older known blocks, so reported transfers below it are reversed too.
      const older = await olderKnownBlocks(
        this.db,
        this.chainId,
        lowestKnown,
        this.config.deepReorgSearchBlocks,
      );
      ancestor = await canonicalAncestor(older, head, this.provider);
      if (older.length > 0) lowestKnown = Number(older[older.length - 1]!.number);
      reach = ancestor === undefined ? 'not_undone' : 'past_window';
    }
    const rollbackTo = ancestor ?? lowestKnown - 1;
    this.logger.warn({ from: newest, to: rollbackTo }, 'reorg detected; rolling back');
    const reorged = await this.db.transaction().execute(async (trx) => {
      const reversed = await rollBackAbove(trx, this.config, rollbackTo);
      await this.saveCursor(trx, rollbackTo + 1);
      return reversed;
    });
    const depth = newest - rollbackTo;
    reach ??= depth >= this.config.confirmations ? 'past_confirmations' : 'within_confirmations';
    this.reportReorg({ depth, reach, fromBlock: newest, rolledBackTo: rollbackTo, reorged });
    return { reorged };
  }

  /** Every reorg to the metrics; one that reached booked money is an error for the operator. */
  private reportReorg(report: ReorgReport): void {
    try {
      this.onReorg(report);
    } catch {
      // A metric that fails must not undo the rollback.
    }
    const fields = {
      ...report,
      confirmations: this.config.confirmations,
      reorgWindowBlocks: this.config.reorgWindowBlocks,
    };
    const alarm = REORG_ALARMS[report.reach];
    if (alarm) this.logger.error(fields, alarm);
  }

  private async scan(
    head: number,
  ): Promise<{ scannedTo: number; observed: number; raced: boolean; storedTip?: HashedBlock }> {
    const from = await this.nextBlock();
    if (from > head) return { scannedTo: from - 1, observed: 0, raced: false };
    const to = Math.min(head, from + this.config.maxBlocksPerPass - 1);
    const { received, depositAddresses } = await this.transfersToWatched(from, to);
    // A sweep between Paygate's own addresses is not money arriving: it was booked at the deposit address.
    const logs = await this.deposits.withoutInternalMoves(received, depositAddresses);
    const hashes = await this.linkedBlockHashes(from, to);
    if (!hashes) return { scannedTo: from - 1, observed: 0, raced: true };
    const canonical = new Map(hashes.map((h) => [h.number, h.hash]));
    // A log of a block no longer canonical raced a reorg: skipped, for the next pass to read the new block.
    const consistent = onKnownChain(logs, canonical);
    const raced = consistent.length !== logs.length;
    const nextCursor = raced
      ? Math.min(...logs.filter((l) => !consistent.includes(l)).map((l) => l.blockNumber))
      : to + 1;
    await this.db.transaction().execute(async (trx) => {
      await this.storeTransfers(trx, consistent);
      const kept = hashes.filter((h) => h.number < nextCursor);
      if (kept.length > 0) {
        await trx
          .insertInto('recent_blocks')
          .values(kept.map((h) => ({ chain_id: this.chainId, number: BigInt(h.number), hash: h.hash })))
          .onConflict((oc) =>
            oc.columns(['chain_id', 'number']).doUpdateSet((eb) => ({ hash: eb.ref('excluded.hash') })),
          )
          .execute();
      }
      await trx
        .deleteFrom('recent_blocks')
        .where('chain_id', '=', this.chainId)
        .where('number', '<', BigInt(Math.max(0, to - this.config.reorgWindowBlocks * 2)))
        .execute();
      await this.saveCursor(trx, nextCursor);
    });
    const storedTip = nextCursor === to + 1 ? hashes[hashes.length - 1] : undefined;
    return { scannedTo: nextCursor - 1, observed: consistent.length, raced: false, storedTip };
  }

  /** Hashes of the reorgable blocks of [from, to]; null if they do not chain on (a reorg during the pass). */
  private async linkedBlockHashes(from: number, to: number): Promise<HashedBlock[] | null> {
    const first = Math.max(from, to - this.config.reorgWindowBlocks + 1);
    const below =
      first === from
        ? await this.db
            .selectFrom('recent_blocks')
            .select('hash')
            .where('chain_id', '=', this.chainId)
            .where('number', '=', BigInt(first - 1))
            .executeTakeFirst()
        : undefined;
    let parent = below?.hash;
    const hashes: HashedBlock[] = [];
    for (let n = first; n <= to; n++) {
      const block = await this.provider.getBlock(n);
      if (!block?.hash) throw new BlockUnavailableError(n);
      if (parent !== undefined && block.parentHash !== parent) {
        this.logger.warn(
          { block: n },
          'chain reorganised during the pass; scanning again after the reorg check',
        );
        return null;
      }
      hashes.push({ number: n, hash: block.hash });
      parent = block.hash;
    }
    return hashes;
  }

  /** USDC transfers in [from, to] to watched addresses: by log filter while few, else every transfer, matched. */
  private async transfersToWatched(
    from: number,
    to: number,
  ): Promise<{ received: TransferLog[]; depositAddresses: string[] }> {
    const now = new Date();
    const watched = await this.deposits.watched(now);
    if (watched !== 'every-transfer') {
      const received = await this.transferLogsTo([...this.config.watchedAddresses, ...watched], from, to);
      return { received, depositAddresses: watched };
    }
    return this.everyTransfer.transfersToWatched(from, to, now);
  }

  /** USDC Transfer logs to any of `recipients` in [from, to], ADDRESSES_PER_LOG_QUERY recipients per call. */
  private async transferLogsTo(recipients: string[], from: number, to: number): Promise<TransferLog[]> {
    const logs: TransferLog[] = [];
    for (let i = 0; i < recipients.length; i += this.config.addressesPerLogQuery) {
      logs.push(
        ...(await getTransferLogs(this.provider, {
          token: this.config.usdcAddress,
          to: recipients.slice(i, i + this.config.addressesPerLogQuery),
          fromBlock: from,
          toBlock: to,
          maxRangeBlocks: this.config.maxRangeBlocks,
        })),
      );
    }
    return logs.sort(compareTransferLogs);
  }

  /** New deposit addresses' earlier payments, marked backfilled as stored (restart-safe); how many. */
  private async backfillNewDepositAddresses(): Promise<number> {
    const pending = await this.deposits.pendingBackfill(BACKFILL_BATCH);
    if (pending.addresses.length === 0) return 0;
    const cursor = await this.nextBlock();
    const end = cursor - 1;
    // From where the scanner was when it heard of them: a queue of addresses lets the cursor pass a payment.
    const floor = Math.max(this.config.startBlock, cursor - this.config.depositBackfillMaxBlocks);
    const heardAt = Math.min(cursor, pending.registeredBlock ?? cursor);
    let start = Math.max(floor, heardAt - this.config.depositBackfillBlocks);
    if (pending.lateSinceSeconds !== null) {
      start = Math.min(start, await this.firstBlockAtOrAfter(pending.lateSinceSeconds, floor, end));
    }
    const found =
      end >= start
        ? await this.deposits.withoutInternalMoves(
            await this.transferLogsTo(pending.addresses, start, end),
            pending.addresses,
          )
        : [];
    // Only logs of blocks still canonical as far as the reorg check knows (recent blocks are compared by hash).
    const recent = await this.db
      .selectFrom('recent_blocks')
      .select(['number', 'hash'])
      .where('chain_id', '=', this.chainId)
      .where('number', '>=', BigInt(start))
      .execute();
    const hashes = new Map(recent.map((r) => [Number(r.number), r.hash]));
    const canonical = onKnownChain(found, hashes);
    await this.db.transaction().execute(async (trx) => {
      await this.storeTransfers(trx, canonical);
      await this.deposits.markBackfilled(trx, pending.addresses);
    });
    if (canonical.length > 0) {
      this.logger.info(
        { addresses: pending.addresses.length, found: canonical.length, fromBlock: start, toBlock: end },
        'deposit addresses paid before the indexer heard of them; transfers backfilled',
      );
    }
    return canonical.length;
  }

  /** The first block in [lo, hi] whose timestamp is at least `seconds` (hi + 1 when none), by bisection. */
  private async firstBlockAtOrAfter(seconds: number, lo: number, hi: number): Promise<number> {
    let low = lo;
    let high = hi + 1;
    while (low < high) {
      const mid = Math.floor((low + high) / 2);
      const block = await this.provider.getBlock(mid);
      if (!block) throw new BlockUnavailableError(mid);
      if (block.timestamp < seconds) low = mid + 1;
      else high = mid;
    }
    return low;
  }

  private async storeTransfers(trx: Transaction<IndexerDatabase>, logs: TransferLog[]): Promise<void> {
    if (logs.length === 0) return;
    const rows = logs.map((log) => ({
      chain_id: this.chainId,
      block_hash: log.blockHash,
      tx_hash: log.txHash,
      log_index: log.logIndex,
      block_number: BigInt(log.blockNumber),
      from_address: log.from,
      to_address: log.to,
      token: log.token,
      amount_micro: log.amountMicro,
      status: 'pending' as const,
    }));
    await insertTransfers(trx, rows);
  }

  private async saveCursor(trx: Transaction<IndexerDatabase>, nextBlock: number): Promise<void> {
    await sql`
      insert into cursors (chain_id, next_block, updated_at) values (${this.chainId}, ${nextBlock}, now())
      on conflict (chain_id) do update set next_block = excluded.next_block, updated_at = now()`.execute(trx);
  }
}
