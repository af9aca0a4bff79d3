import { newEventId, type RelayerSubmitRequest } from '@paygate/contracts';
import { type ServiceContext, WriteBatcher } from '@paygate/runtime';
import type { SettlementDB } from '../db';
import { type ExecutedTransfer, executedIn, type ReceiptFacts, type RelayerChain } from './chain';
import type { RefusedPayers } from './refused-payers';
import { describe, type RelayerSettings, type Row } from './settings';

/** How long after its caller was answered a confirmed row is finished. */
const FINISH_AFTER_MS = 100;
/** Rows marked `broadcast` in one statement at most. */
const BROADCAST_MARKS_PER_STATEMENT = 200;

interface BroadcastMark {
  id: string;
  done(): void;
}

/**
 * The relayed_authorizations rows: found, broadcast (the recorded bytes), and finished from a receipt of any hash
 * a row was signed as. Shared by the submissions and the background pass.
 */
export class RecordedAuthorizations {
  /** Rows being finished after their caller was answered: awaited on stop. */
  private readonly finishing = new Set<Promise<unknown>>();
  /** The receipts of the newest block looked at, one read whatever the number of callers woken by it. */
  private readonly blocks = new Map<bigint, Promise<Map<string, ReceiptFacts> | undefined>>();
  /** False once the node answered that it has no eth_getBlockReceipts: one receipt read per hash then. */
  private blockReceiptsServed = true;
  /**
   * The `broadcast` marks of the submissions whose callers wait for their receipt: written beside that wait, those
   * of a burst in one statement, instead of one round trip each before it.
   */
  private readonly broadcastMarks = new WriteBatcher<BroadcastMark>({
    maxWrites: 1,
    maxPerWrite: BROADCAST_MARKS_PER_STATEMENT,
    fits: () => true,
    write: (batch) => this.markBroadcast(batch),
  });

  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    private readonly chain: RelayerChain,
    private readonly settings: RelayerSettings,
    private readonly refusedPayers: RefusedPayers,
  ) {}

  /** Waits for the rows still being finished after their callers were answered. */
  async finished(): Promise<void> {
    await Promise.allSettled([...this.finishing]);
  }

  async find(request: RelayerSubmitRequest): Promise<Row | undefined> {
    return this.ctx.db
      .selectFrom('relayed_authorizations')
      .selectAll()
      .where('chain_id', '=', request.chainId)
      .where('token_address', '=', request.token.toLowerCase())
      .where('payer', '=', request.authorization.from.toLowerCase())
      .where('auth_nonce', '=', request.authorization.nonce.toLowerCase())
      .executeTakeFirst();
  }

  async byId(id: string): Promise<Row | undefined> {
    return this.ctx.db
      .selectFrom('relayed_authorizations')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async broadcastRecorded(row: Row): Promise<void> {
    if (await this.broadcastOnly(row)) await this.markBroadcast([{ id: row.id, done: () => undefined }]);
  }

  /**
   * Broadcasts for a caller that waits for the receipt next: the row is marked `broadcast` beside that wait (until
   * then it reads `signed`, which the background pass rebroadcasts, the same bytes). On a block every 200 ms a
   * round trip to Postgres before the wait is a share of the paid call; on stop the marks are awaited.
   */
  async broadcastForCaller(row: Row): Promise<void> {
    if (!(await this.broadcastOnly(row))) return;
    const marked = new Promise<void>((done) => this.broadcastMarks.add({ id: row.id, done }));
    this.finishing.add(marked);
    void marked.finally(() => this.finishing.delete(marked));
  }

  /** Sends the recorded bytes; a failure is counted on the row (the background pass tries again). */
  private async broadcastOnly(row: Row): Promise<boolean> {
    try {
      await this.chain.broadcast(row.raw_tx!, row.tx_hash!);
    } catch (error) {
      this.ctx.logger.warn(
        { id: row.id, txHash: row.tx_hash, reason: describe(error) },
        'relayer broadcast failed; will retry',
      );
      await this.ctx.db
        .updateTable('relayed_authorizations')
        .set((eb) => ({ last_error: describe(error), broadcast_attempts: eb('broadcast_attempts', '+', 1) }))
        .where('id', '=', row.id)
        .execute();
      return false;
    }
    return true;
  }

  /** Marks broadcast rows (still open) `broadcast`, one statement; a failure is logged (the pass rebroadcasts). */
  private async markBroadcast(marks: readonly BroadcastMark[]): Promise<void> {
    try {
      await this.ctx.db
        .updateTable('relayed_authorizations')
        .set((eb) => ({
          status: 'broadcast',
          last_error: null,
          last_broadcast_at: new Date(),
          broadcast_attempts: eb('broadcast_attempts', '+', 1),
        }))
        .where(
          'id',
          'in',
          marks.map((mark) => mark.id),
        )
        .where('status', 'in', ['signed', 'broadcast'])
        .execute();
    } catch (error) {
      this.ctx.logger.warn(
        { ids: marks.map((mark) => mark.id), reason: describe(error) },
        'relayed authorizations broadcast but not marked; the background pass will rebroadcast them',
      );
    } finally {
      for (const mark of marks) mark.done();
    }
  }

  /**
   * The columns that identify and restate the authorization itself (the same for every way a row is made), and the
   * pool's key whose nonce sequence it is in (the row's signer: its background pass bumps and watches it).
   */
  authorizationColumns(request: RelayerSubmitRequest, relayerAddress: string) {
    const a = request.authorization;
    return {
      id: `rly_${newEventId()}`,
      chain_id: request.chainId,
      token_address: request.token.toLowerCase(),
      payer: a.from.toLowerCase(),
      auth_nonce: a.nonce.toLowerCase(),
      to_address: a.to.toLowerCase(),
      value_micro: BigInt(a.value),
      valid_after: BigInt(a.validAfter),
      valid_before: BigInt(a.validBefore),
      signature: request.signature.toLowerCase(),
      relayer_address: relayerAddress.toLowerCase(),
      payer_code_hash: null as string | null,
    };
  }

  /**
   * Looks for a receipt of any hash this row was signed as; finishes the row when one exists. With
   * `answerFirst`, a successful transfer is returned as confirmed at once while the row is finished in the
   * background (idempotent; the background pass finishes it if this fails). With `inBlock` (a head that just
   * came), the block's receipts are looked at first, read once for every caller woken by it; a hash not in it
   * is read on its own, unless `onlyNewBlock` (the caller looked before this block, right after the one before
   * it: a transaction not in this block is not mined yet).
   */
  async advance(
    row: Row,
    options: { answerFirst?: boolean; inBlock?: bigint; onlyNewBlock?: boolean } = {},
  ): Promise<Row | undefined> {
    if (row.status !== 'signed' && row.status !== 'broadcast') return row;
    const block = options.inBlock === undefined ? undefined : await this.receiptsOf(options.inBlock);
    for (const hash of [row.tx_hash!, ...row.earlier_tx_hashes]) {
      const inBlock = block?.get(hash.toLowerCase());
      if (!inBlock && block && options.onlyNewBlock) continue;
      const executed: ExecutedTransfer | null = inBlock
        ? executedIn(hash, inBlock, row.payer, row.to_address)
        : await this.chain.executed(hash, row.payer, row.to_address);
      if (!executed) continue;
      if (!executed.reverted) {
        const fields = {
          settled_tx_hash: executed.txHash,
          block_number: executed.blockNumber,
          log_index: executed.logIndex,
        };
        if (!options.answerFirst) return this.finish(row, 'confirmed', fields);
        this.finishInBackground(row, fields);
        return { ...row, status: 'confirmed', ...fields, finished_at: new Date() };
      }
      return this.finishReverted(row, hash, executed.blockNumber);
    }
    return row;
  }

  /** One block's receipts, shared by the callers asking together; undefined when they cannot be read. */
  private receiptsOf(block: bigint): Promise<Map<string, ReceiptFacts> | undefined> {
    if (!this.blockReceiptsServed) return Promise.resolve(undefined);
    let receipts = this.blocks.get(block);
    if (!receipts) {
      receipts = this.chain.blockReceipts(block).catch((error: unknown) => {
        this.blocks.delete(block);
        if (/method not found|not supported|does not exist|unsupported/i.test(describe(error))) {
          this.blockReceiptsServed = false;
        }
        return undefined;
      });
      this.blocks.set(block, receipts);
      // The newest block only: a number read again later may be another block after a reorg.
      for (const known of this.blocks.keys()) if (known < block) this.blocks.delete(known);
    }
    return receipts;
  }

  /**
   * Finishes the row FINISH_AFTER_MS after its caller was answered: off the answer path of the callers woken by the
   * same block (a burst's answers first). Until then the row stays `broadcast`, which every reader handles (a copy
   * of the submission reads the receipt again; the background pass finishes it if this does not).
   */
  private finishInBackground(
    row: Row,
    fields: Pick<Row, 'settled_tx_hash' | 'block_number' | 'log_index'>,
  ): void {
    const finishing = new Promise((resolve) => setTimeout(resolve, FINISH_AFTER_MS))
      .then(() => this.finish(row, 'confirmed', fields))
      .catch((error) =>
        this.ctx.logger.warn(
          { id: row.id, txHash: fields.settled_tx_hash, reason: describe(error) },
          'relayed authorization not finished yet; the background pass will',
        ),
      )
      .finally(() => this.finishing.delete(finishing));
    this.finishing.add(finishing);
  }

  /**
   * Our transaction reverted: someone else used the authorization first (then it is that transaction's), or it
   * failed. A failure the payer caused (its balance, a cancel, or its own signature check saying no in the block
   * after yes in the simulation) refuses the payer, and for its check its code hash, in the same transaction.
   */
  private async finishReverted(row: Row, hash: string, block: bigint): Promise<Row> {
    const otherTx = await this.chain.findAuthorizationUse(
      row.token_address,
      row.payer,
      row.auth_nonce,
      this.settings.lookbackBlocks,
    );
    const other = otherTx ? await this.chain.executed(otherTx, row.payer, row.to_address) : null;
    if (other && !other.reverted) {
      return this.finish(row, 'used_elsewhere', {
        settled_tx_hash: other.txHash,
        block_number: other.blockNumber,
        log_index: other.logIndex,
      });
    }
    const cause = await this.refusedPayers.causeOf(row, block);
    const updated = await this.ctx.inTransaction(async (trx) => {
      const failed = await trx
        .updateTable('relayed_authorizations')
        .set({
          status: 'failed',
          last_error: `transaction ${hash} reverted on chain`,
          finished_at: new Date(),
        })
        .where('id', '=', row.id)
        .where('status', 'in', ['signed', 'broadcast'])
        .returningAll()
        .executeTakeFirst();
      if (failed) await this.refusedPayers.record(trx, failed, hash, cause);
      return failed;
    });
    if (updated) {
      this.ctx.logger.error(
        { id: row.id, status: 'failed', txHash: hash, cause },
        'relayed authorization finished',
      );
      return updated;
    }
    return this.ctx.db
      .selectFrom('relayed_authorizations')
      .selectAll()
      .where('id', '=', row.id)
      .executeTakeFirstOrThrow();
  }

  private async finish(
    row: Row,
    status: 'confirmed' | 'used_elsewhere' | 'failed',
    fields: Partial<Pick<Row, 'settled_tx_hash' | 'block_number' | 'log_index' | 'last_error'>>,
  ): Promise<Row> {
    const updated = await this.ctx.db
      .updateTable('relayed_authorizations')
      .set({ status, ...fields, finished_at: new Date() })
      .where('id', '=', row.id)
      .where('status', 'in', ['signed', 'broadcast'])
      .returningAll()
      .executeTakeFirst();
    const final =
      updated ??
      (await this.ctx.db
        .selectFrom('relayed_authorizations')
        .selectAll()
        .where('id', '=', row.id)
        .executeTakeFirstOrThrow());
    if (updated) {
      const log =
        status === 'failed'
          ? this.ctx.logger.error.bind(this.ctx.logger)
          : this.ctx.logger.info.bind(this.ctx.logger);
      log(
        { id: row.id, status, txHash: final.settled_tx_hash ?? row.tx_hash },
        'relayed authorization finished',
      );
    }
    return final;
  }
}
