import { decodeTransferLog, formatAddress, makeProvider } from '@paygate/chain';
import { type BackgroundTask, PolledTask, PollingLoop } from '@paygate/runtime';
import type { JsonRpcProvider } from 'ethers';
import { sql } from 'kysely';
import type { TransferRow } from '../db';
import type { LedgerContext, LedgerDeps } from '../deps';
import { transferKey } from '../ledger/entries';
import { rebookReversedPayments } from '../payments/confirmed';
import { reverseTransfer } from '../payments/reorged';

export type ChainCheckOutcome = 'confirmed' | 'waiting' | 'missing' | 'reversed' | 'unknown';

/**
 * Confirms or reverses transfers booked by a claim before the chain made them final: a reorg that drops one before
 * the indexer's transfer.observed leaves the indexer nothing to report, so this reads its receipt. The booked
 * Transfer log CONFIRMATIONS deep confirms it; no such log nor mined transaction CONFIRMATIONS blocks after the first
 * miss reverses it as a reorg would, so the ledger never stays above the chain. An unanswered RPC changes nothing.
 */
export class ChainConfirmationCheck extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;
  private provider: JsonRpcProvider | undefined;

  /** Receipts read at once within a pass: a pass's reads overlap, so a backlog is not read one round trip at a time. */
  private static readonly READ_CONCURRENCY = 8;

  /** `onConfirmed` runs after a pass that confirmed a transfer (the release scheduler's kick). */
  constructor(
    private readonly ctx: LedgerContext,
    private readonly deps: LedgerDeps,
    private readonly onConfirmed: () => void = () => {},
  ) {
    super();
    this.loop = new PollingLoop(
      async () => {
        const outcomes = await this.runOnce();
        // A full batch that decided something: more may be ready, so the next pass runs at once (bounded by that
        // progress: a node that answers nothing, or transfers still missing, wait the interval).
        const decided = [...outcomes.values()].some((o) => o === 'confirmed' || o === 'reversed');
        return decided && outcomes.size >= deps.config.chainCheckBatchSize;
      },
      {
        what: 'chain confirmation check',
        logger: ctx.logger,
        intervalMs: deps.config.chainCheckIntervalMs,
        maxBackoffMs: 60_000,
      },
    );
  }

  /** Once no pass runs: the RPC provider the passes read receipts with. */
  protected override async afterStop(): Promise<void> {
    this.provider?.destroy();
  }

  private chain(): JsonRpcProvider {
    const { rpcUrl, rpcTimeoutMs, chainId } = this.deps.config;
    this.provider ??= makeProvider(rpcUrl, { timeoutMs: rpcTimeoutMs, chainId });
    return this.provider;
  }

  /** One pass (also for tests): what happened to each transfer awaiting the chain, by transfer key. */
  async runOnce(): Promise<Map<string, ChainCheckOutcome>> {
    const outcomes = new Map<string, ChainCheckOutcome>();
    await this.reportOverdue();
    if (!(await this.anyAwaiting())) return outcomes;
    const head = BigInt(await this.chain().getBlockNumber());
    const awaiting = await this.takeTurns(head);
    let next = 0;
    const readNext = async () => {
      while (next < awaiting.length && !this.loop.isStopped) {
        const transfer = awaiting[next++]!;
        const key = transferKey(transfer.chain_id, transfer.tx_hash, transfer.log_index);
        let outcome: ChainCheckOutcome;
        try {
          outcome = await this.check(transfer, head);
        } catch (error) {
          this.ctx.logger.warn(
            { transfer: key, err: error },
            'chain confirmation check of a transfer failed',
          );
          outcome = 'unknown';
        }
        outcomes.set(key, outcome);
      }
    };
    await Promise.all(
      Array.from({ length: Math.min(ChainConfirmationCheck.READ_CONCURRENCY, awaiting.length) }, readNext),
    );
    if ([...outcomes.values()].includes('confirmed')) this.onConfirmed();
    return outcomes;
  }

  /** An update of the transfer while it still awaits the chain (another pass, or the indexer, may have decided it). */
  private awaitingRow(transfer: TransferRow) {
    return this.ctx.db
      .updateTable('transfers')
      .where('chain_id', '=', transfer.chain_id)
      .where('tx_hash', '=', transfer.tx_hash)
      .where('log_index', '=', transfer.log_index)
      .where('chain_confirmed_at', 'is', null)
      .where('status', '=', 'observed');
  }

  private async anyAwaiting(): Promise<boolean> {
    const found = await this.ctx.db
      .selectFrom('transfers')
      .select('tx_hash')
      .where('chain_confirmed_at', 'is', null)
      .where('status', '=', 'observed')
      .where('chain_id', '=', this.deps.config.chainId)
      .limit(1)
      .executeTakeFirst();
    return found !== undefined;
  }

  /**
   * This pass's transfers: the lowest turns, each given the next turn as it is read (not after the check, so a pass
   * that fails midway still moves on; rows another replica takes are skipped). One in a block not yet CONFIRMATIONS
   * deep is left for later (its read could only answer "waiting").
   */
  private async takeTurns(head: bigint): Promise<TransferRow[]> {
    const deepAtOrBelow = head + 1n - BigInt(this.deps.config.confirmations);
    const taken = await sql<TransferRow>`with turns as (
          select chain_id, tx_hash, log_index from transfers
            where chain_confirmed_at is null and status = 'observed' and chain_id = ${this.deps.config.chainId}
              and (block_number is null or missing_since_block is not null or block_number <= ${deepAtOrBelow})
            order by chain_check_turn limit ${this.deps.config.chainCheckBatchSize}
            for update skip locked)
        update transfers t set chain_check_turn = nextval('transfers_chain_check_turn')
          from turns
          where t.chain_id = turns.chain_id and t.tx_hash = turns.tx_hash and t.log_index = turns.log_index
          returning t.*`.execute(this.ctx.db);
    return taken.rows;
  }

  /** Transfers unconfirmed CHAIN_CONFIRM_TIMEOUT_MS after booking stay held: an operator is told (gauge, error log). */
  private async reportOverdue(): Promise<void> {
    const timeoutMs = this.deps.config.chainConfirmTimeoutMs;
    if (timeoutMs <= 0) return;
    const since = new Date(this.deps.now().getTime() - timeoutMs);
    const overdue = await sql<{ n: number; oldest: Date | null }>`select count(*)::int as n,
          min(observed_at) as oldest
        from transfers
        where chain_confirmed_at is null and status = 'observed' and chain_id = ${this.deps.config.chainId}
          and observed_at <= ${since}`.execute(this.ctx.db);
    const { n, oldest } = overdue.rows[0]!;
    this.deps.metrics.unconfirmedOverdue.set(n);
    if (n > 0) {
      this.ctx.logger.error(
        { transfers: n, oldestBookedAt: oldest?.toISOString(), timeoutMs },
        'transfers booked from payment.confirmed are not confirmed by the chain in time; their holds stay held',
      );
    }
  }

  private async check(transfer: TransferRow, head: bigint): Promise<ChainCheckOutcome> {
    const confirmations = BigInt(this.deps.config.confirmations);
    const receipt = await this.chain().getTransactionReceipt(transfer.tx_hash);
    const log = receipt?.status === 1 ? receipt.logs.find((l) => l.index === transfer.log_index) : undefined;
    const decoded = log ? decodeTransferLog(log) : null;
    const booked =
      decoded !== null &&
      decoded.token === formatAddress(this.deps.config.usdcAddress) &&
      decoded.from.toLowerCase() === transfer.from_address &&
      // A payment may claim less than the transfer carried (an overpayment): booked from it, it names that amount.
      decoded.amountMicro >= transfer.amount_micro;
    if (receipt && booked) {
      const deep = head - BigInt(receipt.blockNumber) + 1n >= confirmations;
      await this.awaitingRow(transfer)
        .set({
          missing_since_block: null,
          block_number: BigInt(receipt.blockNumber),
          block_hash: receipt.blockHash.toLowerCase(),
          chain_confirmed_at: deep ? this.deps.now() : null,
        })
        .execute();
      return deep ? 'confirmed' : 'waiting';
    }
    if (!receipt) {
      // A node can answer a null receipt for a mined transaction (lagging, or lying): only a transaction the node
      // does not know as mined counts as gone.
      const known = await this.chain().getTransaction(transfer.tx_hash);
      if (known?.blockNumber !== null && known?.blockNumber !== undefined) return 'unknown';
    }
    if (transfer.missing_since_block === null) {
      await this.awaitingRow(transfer).set({ missing_since_block: head }).execute();
      return 'missing';
    }
    if (head - transfer.missing_since_block < confirmations) return 'missing';
    return this.reverse(transfer, head);
  }

  private async reverse(transfer: TransferRow, head: bigint): Promise<ChainCheckOutcome> {
    const key = transferKey(transfer.chain_id, transfer.tx_hash, transfer.log_index);
    const reversed = await this.ctx.inTransaction(async (trx) => {
      const locked = await sql<TransferRow>`select * from transfers
          where chain_id = ${transfer.chain_id} and tx_hash = ${transfer.tx_hash} and log_index = ${transfer.log_index}
            and chain_confirmed_at is null and status = 'observed' and missing_since_block is not null
          for update`.execute(trx);
      const row = locked.rows[0];
      if (!row) return false; // confirmed or reversed meanwhile
      await reverseTransfer(trx, this.deps, row, {
        reason: 'not_on_chain',
        memo: { missingSinceBlock: transfer.missing_since_block?.toString(), head: head.toString() },
        eventId: null,
      });
      // The same transaction may already be booked again at another log index (mined again in another block).
      await rebookReversedPayments(trx, this.deps, transfer.chain_id, transfer.tx_hash);
      return true;
    });
    if (reversed) {
      this.deps.metrics.conflicts.inc({ kind: 'transfer_not_on_chain' });
      this.deps.logger.error(
        { transfer: key, missingSinceBlock: transfer.missing_since_block?.toString(), head: head.toString() },
        'transfer booked from payment.confirmed is not on the chain CONFIRMATIONS blocks later; reversed',
      );
    }
    return reversed ? 'reversed' : 'unknown';
  }
}
