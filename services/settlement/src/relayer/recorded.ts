import { newEventId, type RelayerSubmitRequest } from '@paygate/contracts';
import { type ServiceContext, WriteBatcher } from '@paygate/runtime';
import { broadcastCounted, type SettlementDB } from '../db';
import { describe } from '../errors';
import { type ExecutedTransfer, executedIn, type ReceiptFacts, type RelayerChain, settledBy } from './chain';
import type { RefusedPayers } from './refused-payers';
import type { RelayerSettings, Row } from './settings';

/** How long after its caller was answered a confirmed row is finished. */
const FINISH_AFTER_MS = 100;
const BROADCAST_MARKS_PER_STATEMENT = 200;

interface BroadcastMark {
  id: string;
  done(): void;
}

/** The relayed_authorizations rows: found, broadcast as recorded, finished from a receipt of any hash they had. */
export class RecordedAuthorizations {
  /** Rows being finished after their caller was answered: awaited on stop. */
  private readonly finishing = new Set<Promise<unknown>>();
  /** The receipts of the newest block looked at, one read for every caller woken by it. */
  private readonly blocks = new Map<bigint, Promise<Map<string, ReceiptFacts> | undefined>>();
  /** False once the node answered that it has no eth_getBlockReceipts. */
  private blockReceiptsServed = true;
  /** The `broadcast` marks of waiting callers' submissions: a burst's in one statement, beside the wait. */
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

  /** Broadcasts for a waiting caller; the row is marked `broadcast` beside the wait (until then `signed`). */
  async broadcastForCaller(row: Row): Promise<void> {
    if (!(await this.broadcastOnly(row))) return;
    const marked = new Promise<void>((done) => this.broadcastMarks.add({ id: row.id, done }));
    this.finishing.add(marked);
    void marked.finally(() => this.finishing.delete(marked));
  }

  /** Sends the recorded bytes; a failure is counted on the row (the background pass tries again). */
  private async broadcastOnly(row: Row): Promise<boolean> {
    const refusal = await this.send(row, 'relayer broadcast failed; will retry');
    if (refusal === undefined) return true;
    await this.ctx.db
      .updateTable('relayed_authorizations')
      .set((eb) => ({ last_error: refusal, broadcast_attempts: eb('broadcast_attempts', '+', 1) }))
      .where('id', '=', row.id)
      .execute();
    return false;
  }

  /** Sends the recorded bytes; a refusal is logged with `failedMessage` and its reason returned. */
  async send(row: Row, failedMessage: string): Promise<string | undefined> {
    try {
      await this.chain.broadcast(row.raw_tx!, row.tx_hash!);
      return undefined;
    } catch (error) {
      const reason = describe(error);
      this.ctx.logger.warn({ id: row.id, txHash: row.tx_hash, reason }, failedMessage);
      return reason;
    }
  }

  private async markBroadcast(marks: readonly BroadcastMark[]): Promise<void> {
    const ids = marks.map((mark) => mark.id);
    try {
      await this.ctx.db
        .updateTable('relayed_authorizations')
        .set({ status: 'broadcast', last_error: null, ...broadcastCounted() })
        .where('id', 'in', ids)
        .where('status', 'in', ['signed', 'broadcast'])
        .execute();
    } catch (error) {
      this.ctx.logger.warn(
        { ids, reason: describe(error) },
        'relayed authorizations broadcast but not marked; the background pass will rebroadcast them',
      );
    } finally {
      for (const mark of marks) mark.done();
    }
  }

  /** The columns that restate the authorization, and the key whose nonce sequence the row is in. */
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
    };
  }

  /**
   * Finishes the row from a receipt of any hash it had. `answerFirst`: a success answers at once, finished later;
   * `inBlock`: that block's shared receipts first (`onlyNewBlock`: only there).
   */
  async advance(
    row: Row,
    options: { answerFirst?: boolean; inBlock?: bigint; onlyNewBlock?: boolean } = {},
  ): Promise<Row> {
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
        if (!options.answerFirst) return this.finish(row, 'confirmed', executed);
        this.finishInBackground(row, executed);
        return { ...row, status: 'confirmed', ...settledBy(executed), finished_at: new Date() };
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
      // The newest block only: after a reorg the same number is another block.
      for (const known of this.blocks.keys()) if (known < block) this.blocks.delete(known);
    }
    return receipts;
  }

  /** Off the answer path of the callers woken by the same block; the background pass finishes it if this does not. */
  private finishInBackground(row: Row, executed: ExecutedTransfer): void {
    const finishing = new Promise((resolve) => setTimeout(resolve, FINISH_AFTER_MS))
      .then(() => this.finish(row, 'confirmed', executed))
      .catch((error) =>
        this.ctx.logger.warn(
          { id: row.id, txHash: executed.txHash, reason: describe(error) },
          'relayed authorization not finished yet; the background pass will',
        ),
      )
      .finally(() => this.finishing.delete(finishing));
    this.finishing.add(finishing);
  }

  /** Reverted: used by someone else first (then it is that transaction's), or failed, refusing its payer with it. */
  private async finishReverted(row: Row, hash: string, block: bigint): Promise<Row> {
    const other = await this.chain.authorizationUse(
      { tokenAddress: row.token_address, payer: row.payer, nonce: row.auth_nonce, to: row.to_address },
      this.settings.lookbackBlocks,
    );
    if (other) return this.finish(row, 'used_elsewhere', other);
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
    if (!updated) return (await this.byId(row.id))!;
    this.ctx.logger.error(
      { id: row.id, status: 'failed', txHash: hash, cause },
      'relayed authorization finished',
    );
    return updated;
  }

  private async finish(
    row: Row,
    status: 'confirmed' | 'used_elsewhere',
    executed: ExecutedTransfer,
  ): Promise<Row> {
    const updated = await this.ctx.db
      .updateTable('relayed_authorizations')
      .set({ status, ...settledBy(executed), finished_at: new Date() })
      .where('id', '=', row.id)
      .where('status', 'in', ['signed', 'broadcast'])
      .returningAll()
      .executeTakeFirst();
    if (!updated) return (await this.byId(row.id))!;
    this.ctx.logger.info(
      { id: row.id, status, txHash: updated.settled_tx_hash ?? row.tx_hash },
      'relayed authorization finished',
    );
    return updated;
  }
}
