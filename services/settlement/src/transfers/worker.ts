import { createHash } from 'node:crypto';
import { formatUsdc, parseChainUsdc } from '@paygate/money';
import { type BackgroundTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
import type { SettlementConfig } from '../config';
import { crashIfConfigured } from '../crash';
import type { SettlementDB, TransferKind } from '../db';
import type { LedgerClient } from '../ledger/client';
import type { SettlementMetrics } from '../metrics';
import type { EscrowChain } from './chain';
import type { TransferRow } from './repository';

/** What the owner of a transfer (settlement or refund) does, in the same transaction, when it ends. */
export interface TransferOutcomeHandler {
  onConfirmed(trx: Transaction<SettlementDB>, transfer: TransferRow): Promise<void>;
  onFailed(trx: Transaction<SettlementDB>, transfer: TransferRow, reason: string): Promise<void>;
}

const OPEN_BATCH = 100;
const SIGN_BATCH = 20;
const PREFLIGHT_BACKOFF_MAX_MS = 5 * 60_000;
const LEDGER_RETRY_MS = 5000;

function describe(error: unknown): string {
  const e = error as { shortMessage?: string; message?: string };
  return String(e?.shortMessage ?? e?.message ?? error).slice(0, 500);
}

/**
 * Sends every outgoing transfer exactly once:
 *  1. `created`  -> under a Postgres advisory lock (one signer for the escrow key across replicas): pre-flight,
 *     allocate the nonce (max of our highest recorded nonce + 1 and the chain's pending nonce), sign, and COMMIT
 *     the signed bytes, hash and nonce (`signed`) before anything is broadcast.
 *  2. `signed`/`broadcast` without a receipt -> broadcast the SAME recorded bytes (never re-signed); again after
 *     TX_TIMEOUT_MS without a receipt.
 *  3. a receipt with enough confirmations -> `confirmed` (or `failed` if it reverted), and the owner's outcome
 *     (event via the outbox) in the same transaction, guarded by the state change so it happens once.
 * Every pass starts with step 2/3 for what is already recorded, which is also the crash recovery.
 */
export class TransferWorker implements BackgroundTask {
  private readonly loop: PollingLoop;
  private readonly lockKey: string;

  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    private readonly config: SettlementConfig,
    private readonly chain: EscrowChain,
    private readonly metrics: SettlementMetrics,
    private readonly handlers: Record<TransferKind, TransferOutcomeHandler>,
    private readonly ledger: LedgerClient,
  ) {
    // One signer per escrow key within this deployment (its schema holds the nonces it allocates).
    const digest = createHash('sha256')
      .update(`settlement-sender:${config.dbSchema}:${config.chainId}:${chain.address.toLowerCase()}`)
      .digest();
    this.lockKey = BigInt.asIntN(64, BigInt(`0x${digest.subarray(0, 8).toString('hex')}`)).toString();
    this.loop = new PollingLoop(() => this.runOnce(), {
      what: 'transfer pass',
      logger: ctx.logger,
      intervalMs: config.transferPollIntervalMs,
    });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Run a pass soon (new work was recorded). */
  kick(): void {
    this.loop.kick();
  }

  /** One bounded pass: advance what is recorded (recovery first), then sign and send what is new. */
  async runOnce(): Promise<void> {
    await this.watchConfirmed();
    await this.advanceOpen();
    await this.signCreated();
  }

  /**
   * Confirmed transfers are watched for another CONFIRMATIONS blocks (the reorg window past the one they were
   * confirmed in): one whose receipt disappeared while escrow's nonce for it is not consumed is broadcast again
   * with the SAME recorded bytes (same hash, so the outcome already reported stays true), before any later nonce
   * can be mined. Bounded: OPEN_BATCH rows a pass; final once 2 x CONFIRMATIONS deep.
   */
  private async watchConfirmed(): Promise<void> {
    const watched = await this.ctx.db
      .selectFrom('outgoing_transfers')
      .selectAll()
      .where('status', '=', 'confirmed')
      .where('final_at', 'is', null)
      .where('chain_id', '=', this.config.chainId)
      .orderBy('nonce')
      .limit(OPEN_BATCH)
      .execute();
    if (watched.length === 0) return;
    const head = await this.chain.blockNumber();
    const finalDepth = 2n * BigInt(this.config.confirmations);
    let minedNonce: bigint | undefined;
    for (const transfer of watched) {
      if (this.loop.isStopped) return;
      const receipt = await this.chain.receipt(transfer.tx_hash!);
      if (receipt) {
        const final = head - receipt.blockNumber + 1n >= finalDepth;
        if (final || receipt.blockNumber !== transfer.block_number) {
          await this.ctx.db
            .updateTable('outgoing_transfers')
            .set({ block_number: receipt.blockNumber, ...(final ? { final_at: new Date() } : {}) })
            .where('transfer_id', '=', transfer.transfer_id)
            .execute();
        }
        continue;
      }
      minedNonce ??= await this.chain.minedNonce();
      if (transfer.nonce === null || minedNonce > transfer.nonce) continue; // a lagging node: look again
      if (!(await this.wouldSucceedNow(transfer))) continue;
      this.ctx.logger.warn(
        { transferId: transfer.transfer_id, txHash: transfer.tx_hash, nonce: transfer.nonce.toString() },
        'confirmed transfer dropped by a reorg; broadcasting the recorded transaction again',
      );
      try {
        await this.chain.broadcast(transfer.raw_tx!, transfer.tx_hash!);
      } catch (error) {
        this.ctx.logger.warn(
          { transferId: transfer.transfer_id, txHash: transfer.tx_hash, reason: describe(error) },
          'rebroadcast after a reorg failed; will retry',
        );
        continue;
      }
      await this.ctx.db
        .updateTable('outgoing_transfers')
        .set((eb) => ({
          last_broadcast_at: new Date(),
          reorg_rebroadcasts: eb('reorg_rebroadcasts', '+', 1),
          broadcast_attempts: eb('broadcast_attempts', '+', 1),
        }))
        .where('transfer_id', '=', transfer.transfer_id)
        .execute();
    }
  }

  private async advanceOpen(): Promise<void> {
    const open = await this.ctx.db
      .selectFrom('outgoing_transfers')
      .selectAll()
      .where('status', 'in', ['signed', 'broadcast'])
      .where('chain_id', '=', this.config.chainId)
      .orderBy('nonce')
      .limit(OPEN_BATCH)
      .execute();
    let head: bigint | undefined;
    for (const transfer of open) {
      if (this.loop.isStopped) return;
      const receipt = await this.chain.receipt(transfer.tx_hash!);
      if (receipt) {
        head ??= await this.chain.blockNumber();
        const confirmations = head - receipt.blockNumber + 1n;
        if (confirmations >= BigInt(this.config.confirmations)) {
          await this.finish(transfer, receipt.status === 1, receipt.blockNumber);
        } else if (transfer.status === 'signed' || transfer.block_number !== receipt.blockNumber) {
          // Mined (so broadcast); its block is kept so that a reorg taking it away is noticed at once below.
          await this.markBroadcast(transfer.transfer_id, false, receipt.blockNumber);
        }
        continue;
      }
      const lastSentMs = transfer.last_broadcast_at?.getTime() ?? 0;
      // Mined before and now without a receipt: a reorg dropped it, so it is sent again now, not TX_TIMEOUT_MS on.
      const droppedByReorg = transfer.block_number !== null;
      if (
        transfer.status === 'signed' ||
        droppedByReorg ||
        Date.now() - lastSentMs >= this.config.txTimeoutMs
      ) {
        if (droppedByReorg) {
          if (!(await this.wouldSucceedNow(transfer))) continue;
          this.ctx.logger.warn(
            {
              transferId: transfer.transfer_id,
              txHash: transfer.tx_hash,
              block: transfer.block_number?.toString(),
            },
            'transfer mined, then dropped by a reorg before CONFIRMATIONS; rebroadcasting the recorded transaction',
          );
        } else if (transfer.status === 'broadcast') {
          this.ctx.logger.warn(
            { transferId: transfer.transfer_id, txHash: transfer.tx_hash },
            'transfer has no receipt after TX_TIMEOUT_MS; rebroadcasting the recorded transaction',
          );
        }
        await this.broadcastRecorded(transfer);
      }
    }
  }

  /**
   * Before a transaction a reorg dropped is sent again: the same pre-flight as before signing. The reorg may also
   * have dropped money it was paid from (a sweep into escrow, sent again by the relayer); mined before that, the
   * same bytes would revert and the payout fail. Escrow's later nonces wait behind this one meanwhile, so waiting a
   * pass (or a few) for the balance costs nothing; bounded by the passes themselves.
   */
  private async wouldSucceedNow(transfer: TransferRow): Promise<boolean> {
    try {
      await this.chain.estimateTransferGas(transfer.to_address, transfer.amount_micro);
      return true;
    } catch (error) {
      this.ctx.logger.warn(
        { transferId: transfer.transfer_id, txHash: transfer.tx_hash, reason: describe(error) },
        'transfer dropped by a reorg would not succeed now; sent again once escrow covers it',
      );
      return false;
    }
  }

  private async broadcastRecorded(transfer: TransferRow): Promise<void> {
    try {
      await this.chain.broadcast(transfer.raw_tx!, transfer.tx_hash!);
    } catch (error) {
      this.ctx.logger.warn(
        { transferId: transfer.transfer_id, txHash: transfer.tx_hash, reason: describe(error) },
        'broadcast failed; will retry the same transaction',
      );
      await this.ctx.db
        .updateTable('outgoing_transfers')
        .set((eb) => ({ last_error: describe(error), broadcast_attempts: eb('broadcast_attempts', '+', 1) }))
        .where('transfer_id', '=', transfer.transfer_id)
        .execute();
      return;
    }
    crashIfConfigured(this.config, 'after_broadcast');
    await this.markBroadcast(transfer.transfer_id, true);
  }

  private async markBroadcast(
    transferId: string,
    sentNow: boolean,
    minedIn: bigint | null = null,
  ): Promise<void> {
    await this.ctx.db
      .updateTable('outgoing_transfers')
      .set((eb) => ({
        status: 'broadcast',
        last_error: null,
        // The block it was seen mined in, or null once it is sent again (no block holds it now).
        block_number: minedIn,
        ...(sentNow
          ? { last_broadcast_at: new Date(), broadcast_attempts: eb('broadcast_attempts', '+', 1) }
          : {}),
      }))
      .where('transfer_id', '=', transferId)
      .where('status', 'in', ['signed', 'broadcast'])
      .execute();
  }

  private async finish(transfer: TransferRow, succeeded: boolean, blockNumber: bigint): Promise<void> {
    const reason = 'the transaction reverted on chain';
    const finished = await this.ctx.inTransaction(async (trx) => {
      const updated = await trx
        .updateTable('outgoing_transfers')
        .set(
          succeeded
            ? { status: 'confirmed', confirmed_at: new Date(), block_number: blockNumber, last_error: null }
            : { status: 'failed', failed_at: new Date(), block_number: blockNumber, last_error: reason },
        )
        .where('transfer_id', '=', transfer.transfer_id)
        .where('status', 'in', ['signed', 'broadcast'])
        .returningAll()
        .executeTakeFirst();
      if (!updated) return undefined; // another replica finished it
      const handler = this.handlers[updated.kind];
      if (succeeded) await handler.onConfirmed(trx, updated);
      else await handler.onFailed(trx, updated, reason);
      return updated;
    });
    if (!finished) return;
    if (succeeded) {
      this.metrics.transferSent(finished.kind);
      this.ctx.logger.info(
        { transferId: finished.transfer_id, kind: finished.kind, txHash: finished.tx_hash },
        'transfer confirmed',
      );
    } else {
      this.metrics.transfersFailed.inc({ kind: finished.kind });
      this.ctx.logger.error(
        { transferId: finished.transfer_id, kind: finished.kind, txHash: finished.tx_hash },
        'transfer reverted on chain',
      );
    }
  }

  private async signCreated(): Promise<void> {
    const due = await this.ctx.db
      .selectFrom('outgoing_transfers')
      .select('transfer_id')
      .where('status', '=', 'created')
      .where('chain_id', '=', this.config.chainId)
      .where('next_attempt_at', '<=', new Date())
      .orderBy('created_at')
      .limit(SIGN_BATCH)
      .execute();
    for (const { transfer_id } of due) {
      if (this.loop.isStopped) return;
      if (!(await this.authorize(transfer_id))) continue;
      const signed = await this.signAndRecord(transfer_id);
      if (!signed) continue;
      crashIfConfigured(this.config, 'after_record');
      await this.broadcastRecorded(signed);
    }
  }

  /**
   * Escrow is shared: before a transfer is signed, the ledger must say it booked exactly this transfer (kind,
   * idempotency key, recipient, amount) and has not seen it sent, and it must be within MAX_TRANSFER_USDC. A
   * refusal fails the transfer (never signed) and tells its owner; an unanswered ledger postpones it.
   */
  private async authorize(transferId: string): Promise<boolean> {
    const transfer = await this.ctx.db
      .selectFrom('outgoing_transfers')
      .selectAll()
      .where('transfer_id', '=', transferId)
      .where('status', '=', 'created')
      .executeTakeFirst();
    if (!transfer) return false;
    let refusal: { reason: string; message: string } | undefined;
    if (transfer.amount_micro > parseChainUsdc(this.config.maxTransferUsdc)) {
      refusal = {
        reason: 'exceeds_transfer_cap',
        message: `${formatUsdc(transfer.amount_micro)} USDC is above MAX_TRANSFER_USDC (${formatUsdc(parseChainUsdc(this.config.maxTransferUsdc))})`,
      };
    } else {
      try {
        const reply = await this.ledger.authorizeTransfer({
          kind: transfer.kind,
          id: transfer.idempotency_key,
          to: transfer.to_address,
          amount: formatUsdc(transfer.amount_micro),
        });
        if (!reply.ok) refusal = { reason: reply.reason, message: reply.message };
      } catch (error) {
        await this.ctx.db
          .updateTable('outgoing_transfers')
          .set({
            last_error: `ledger authorisation unavailable: ${describe(error)}`,
            next_attempt_at: new Date(Date.now() + LEDGER_RETRY_MS),
          })
          .where('transfer_id', '=', transferId)
          .where('status', '=', 'created')
          .execute();
        this.ctx.logger.warn({ transferId, err: error }, 'ledger did not authorise in time; will ask again');
        return false;
      }
    }
    if (!refusal) return true;
    const reason = `not sent: ${refusal.reason}: ${refusal.message}`;
    const failed = await this.ctx.inTransaction(async (trx) => {
      const row = await trx
        .updateTable('outgoing_transfers')
        .set({ status: 'failed', failed_at: new Date(), last_error: reason })
        .where('transfer_id', '=', transferId)
        .where('status', '=', 'created')
        .returningAll()
        .executeTakeFirst();
      if (row) await this.handlers[row.kind].onFailed(trx, row, reason);
      return row;
    });
    if (failed) {
      this.metrics.transfersRefused.inc({ kind: failed.kind, reason: refusal.reason });
      this.metrics.transfersFailed.inc({ kind: failed.kind });
      this.ctx.logger.error(
        {
          transferId,
          kind: failed.kind,
          key: failed.idempotency_key,
          to: failed.to_address,
          amount: formatUsdc(failed.amount_micro),
          reason: refusal.reason,
        },
        'transfer out of escrow refused before signing',
      );
    }
    return false;
  }

  /** Signs one transfer and commits the signed transaction; nothing reaches the chain here. */
  private async signAndRecord(transferId: string): Promise<TransferRow | undefined> {
    let failed: TransferRow | undefined;
    const signed = await this.ctx.inTransaction(async (trx) => {
      // One signer per escrow key: nonce allocation and recording are serialised across replicas.
      await sql`select pg_advisory_xact_lock(${this.lockKey}::bigint)`.execute(trx);
      const transfer = await trx
        .selectFrom('outgoing_transfers')
        .selectAll()
        .where('transfer_id', '=', transferId)
        .where('status', '=', 'created')
        .forUpdate()
        .executeTakeFirst();
      if (!transfer) return undefined;

      let gasEstimate: bigint;
      try {
        gasEstimate = await this.chain.estimateTransferGas(transfer.to_address, transfer.amount_micro);
      } catch (error) {
        const attempts = transfer.preflight_attempts + 1;
        const reason = `pre-flight failed: ${describe(error)}`;
        if (attempts >= this.config.maxPreflightAttempts) {
          failed = await trx
            .updateTable('outgoing_transfers')
            .set({
              status: 'failed',
              failed_at: new Date(),
              preflight_attempts: attempts,
              last_error: reason,
            })
            .where('transfer_id', '=', transferId)
            .returningAll()
            .executeTakeFirstOrThrow();
          await this.handlers[failed.kind].onFailed(trx, failed, reason);
          return undefined;
        }
        const delayMs = Math.min(1000 * 2 ** attempts, PREFLIGHT_BACKOFF_MAX_MS);
        await trx
          .updateTable('outgoing_transfers')
          .set({
            preflight_attempts: attempts,
            last_error: reason,
            next_attempt_at: new Date(Date.now() + delayMs),
          })
          .where('transfer_id', '=', transferId)
          .execute();
        this.ctx.logger.warn({ transferId, attempts, reason }, 'transfer pre-flight failed; will retry');
        return undefined;
      }

      const highest = await trx
        .selectFrom('outgoing_transfers')
        .select((eb) => eb.fn.max('nonce').as('nonce'))
        .where('chain_id', '=', transfer.chain_id)
        .where('from_address', '=', transfer.from_address)
        .executeTakeFirst();
      const fromDb =
        highest?.nonce === null || highest?.nonce === undefined ? 0n : BigInt(highest.nonce) + 1n;
      const fromChain = await this.chain.pendingNonce();
      const nonce = fromDb > fromChain ? fromDb : fromChain;
      const { rawTx, txHash } = await this.chain.signTransfer({
        to: transfer.to_address,
        amountMicro: transfer.amount_micro,
        nonce,
        gasLimit: (gasEstimate * 13n) / 10n,
      });
      return trx
        .updateTable('outgoing_transfers')
        .set({
          status: 'signed',
          nonce,
          raw_tx: rawTx,
          tx_hash: txHash,
          signed_at: new Date(),
          last_error: null,
        })
        .where('transfer_id', '=', transferId)
        .returningAll()
        .executeTakeFirstOrThrow();
    });
    if (failed) {
      this.metrics.transfersFailed.inc({ kind: failed.kind });
      this.ctx.logger.error({ transferId, reason: failed.last_error }, 'transfer given up before signing');
    }
    if (signed) {
      this.ctx.logger.info(
        { transferId, kind: signed.kind, nonce: signed.nonce?.toString(), txHash: signed.tx_hash },
        'transfer signed and recorded',
      );
    }
    return signed;
  }
}
