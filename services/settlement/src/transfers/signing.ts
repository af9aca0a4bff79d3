import { formatUsdc, parseChainUsdc } from '@paygate/money';
import { type BackoffPolicy, backoffDelayMs } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
import { crashIfConfigured } from '../crash';
import type { SettlementDB } from '../db';
import { EscrowShortError } from '../errors';
import { TransferRefusal } from '../reasons';
import type { TransferBroadcaster } from './broadcast';
import type { TransferRow } from './repository';
import { describe, type TransferWorkerDeps } from './worker-deps';

const SIGN_BATCH = 20;
/**
 * Pre-flight retries: 2 s, 4 s, ... up to 5 min, at the ceiling of the shared backoff (no jitter). Deterministic on
 * purpose: MAX_PREFLIGHT_ATTEMPTS gives up and fails the payout, so these delays set how long escrow has to become
 * able to pay (e.g. a sweep still on its way); full jitter would shorten that window at random.
 */
const PREFLIGHT_BACKOFF: BackoffPolicy = { baseMs: 2000, maxMs: 5 * 60_000 };
const AT_CEILING = () => 1;

interface Refusal {
  reason: TransferRefusal;
  message: string;
}

/**
 * `created` transfers: within MAX_TRANSFER_USDC, then, under a Postgres advisory lock (one signer for the escrow
 * key across replicas), pre-flight, nonce allocation, signing, and the COMMIT of the signed bytes, hash and nonce
 * (`signed`) before anything is broadcast.
 */
export class TransferSigner {
  constructor(
    private readonly deps: TransferWorkerDeps,
    private readonly lockKey: string,
    private readonly broadcaster: TransferBroadcaster,
  ) {}

  async signCreated(): Promise<void> {
    const { ctx, config } = this.deps;
    const due = await ctx.db
      .selectFrom('outgoing_transfers')
      .select('transfer_id')
      .where('status', '=', 'created')
      .where('chain_id', '=', config.chainId)
      .where('next_attempt_at', '<=', new Date())
      .orderBy('created_at')
      .limit(SIGN_BATCH)
      .execute();
    for (const { transfer_id } of due) {
      if (this.deps.isStopped()) return;
      if (!(await this.withinCap(transfer_id))) continue;
      const signed = await this.signAndRecord(transfer_id);
      if (!signed) continue;
      crashIfConfigured(config, 'after_record');
      await this.broadcaster.broadcastRecorded(signed);
    }
  }

  /**
   * Escrow is shared: a transfer is recorded only from the ledger's own event (its outbox; no other bus user may
   * publish what settlement pays), to the address that event names, and is never signed above MAX_TRANSFER_USDC.
   * Above it the transfer fails, never signed, and its owner is told (a payout's reservation is then given back).
   */
  private async withinCap(transferId: string): Promise<boolean> {
    const transfer = await this.deps.ctx.db
      .selectFrom('outgoing_transfers')
      .selectAll()
      .where('transfer_id', '=', transferId)
      .where('status', '=', 'created')
      .executeTakeFirst();
    if (!transfer) return false;
    const capMicro = parseChainUsdc(this.deps.config.maxTransferUsdc);
    if (transfer.amount_micro <= capMicro) return true;
    await this.failRefused(transferId, {
      reason: TransferRefusal.ExceedsTransferCap,
      message: `${formatUsdc(transfer.amount_micro)} USDC is above MAX_TRANSFER_USDC (${formatUsdc(capMicro)})`,
    });
    return false;
  }

  /** A refused transfer fails, never signed, and its owner is told in the same transaction. */
  private async failRefused(transferId: string, refusal: Refusal): Promise<void> {
    const { ctx, metrics, handlers } = this.deps;
    const reason = `not sent: ${refusal.reason}: ${refusal.message}`;
    const failed = await ctx.inTransaction(async (trx) => {
      const row = await trx
        .updateTable('outgoing_transfers')
        .set({ status: 'failed', failed_at: new Date(), last_error: reason })
        .where('transfer_id', '=', transferId)
        .where('status', '=', 'created')
        .returningAll()
        .executeTakeFirst();
      if (row) await handlers[row.kind].onFailed(trx, row, reason);
      return row;
    });
    if (!failed) return;
    metrics.transfersRefused.inc({ kind: failed.kind, reason: refusal.reason });
    metrics.transfersFailed.inc({ kind: failed.kind });
    ctx.logger.error(
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

  /** Signs one transfer and commits the signed transaction; nothing reaches the chain here. */
  private async signAndRecord(transferId: string): Promise<TransferRow | undefined> {
    const { ctx, chain, metrics } = this.deps;
    let failed: TransferRow | undefined;
    const signed = await ctx.inTransaction(async (trx) => {
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
        await this.assertMinedFundsCover(trx, transfer);
        gasEstimate = await chain.estimateTransferGas(transfer.to_address, transfer.amount_micro);
      } catch (error) {
        failed = await this.recordPreflightFailure(trx, transfer, error);
        return undefined;
      }

      const nonce = await this.nextNonce(trx, transfer);
      const { rawTx, txHash } = await chain.signTransfer({
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
      metrics.transfersFailed.inc({ kind: failed.kind });
      ctx.logger.error({ transferId, reason: failed.last_error }, 'transfer given up before signing');
    }
    if (signed) {
      ctx.logger.info(
        { transferId, kind: signed.kind, nonce: signed.nonce?.toString(), txHash: signed.tx_hash },
        'transfer signed and recorded',
      );
    }
    return signed;
  }

  /**
   * A failed pre-flight (inside the signing transaction): retried with backoff, or, after MAX_PREFLIGHT_ATTEMPTS,
   * the transfer fails and its owner is told. Returns the failed row, if it failed.
   */
  private async recordPreflightFailure(
    trx: Transaction<SettlementDB>,
    transfer: TransferRow,
    error: unknown,
  ): Promise<TransferRow | undefined> {
    const transferId = transfer.transfer_id;
    const attempts = transfer.preflight_attempts + 1;
    const reason = `pre-flight failed: ${describe(error)}`;
    if (attempts >= this.deps.config.maxPreflightAttempts) {
      const failed = await trx
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
      await this.deps.handlers[failed.kind].onFailed(trx, failed, reason);
      return failed;
    }
    const delayMs = backoffDelayMs(attempts, PREFLIGHT_BACKOFF, AT_CEILING)!;
    await trx
      .updateTable('outgoing_transfers')
      .set({
        preflight_attempts: attempts,
        last_error: reason,
        next_attempt_at: new Date(Date.now() + delayMs),
      })
      .where('transfer_id', '=', transferId)
      .execute();
    this.deps.ctx.logger.warn({ transferId, attempts, reason }, 'transfer pre-flight failed; will retry');
    return undefined;
  }

  /**
   * The pre-flight's balance check (under the lock): escrow's USDC already mined, less every transfer of its own
   * recorded and not yet mined (nonce at or above the mined count), must cover this one. eth_estimateGas alone is
   * not enough: a node may simulate on its pending block, counting money still on its way into escrow (a sweep,
   * a buyer's transfer) that the block can then order after this transfer, which reverts; and a recorded
   * transaction not yet in the pool (its broadcast failed) is in no simulation at all.
   */
  private async assertMinedFundsCover(trx: Transaction<SettlementDB>, transfer: TransferRow): Promise<void> {
    const { balanceMicro, minedNonce } = await this.deps.chain.minedState();
    const unmined = await trx
      .selectFrom('outgoing_transfers')
      .select((eb) => eb.fn.coalesce(eb.fn.sum<string>('amount_micro'), eb.lit(0)).as('amount'))
      .where('chain_id', '=', transfer.chain_id)
      .where('from_address', '=', transfer.from_address)
      .where('nonce', '>=', minedNonce)
      .executeTakeFirstOrThrow();
    const available = balanceMicro - BigInt(unmined.amount);
    if (available < transfer.amount_micro) {
      throw new EscrowShortError(
        `escrow holds ${formatUsdc(balanceMicro)} USDC mined, ${formatUsdc(BigInt(unmined.amount))} of it owed to its transactions not yet mined; ${formatUsdc(transfer.amount_micro)} needed`,
      );
    }
  }

  /** The next nonce of the escrow key (under the lock): past every recorded one, and not below the chain's. */
  private async nextNonce(trx: Transaction<SettlementDB>, transfer: TransferRow): Promise<bigint> {
    const highest = await trx
      .selectFrom('outgoing_transfers')
      .select((eb) => eb.fn.max('nonce').as('nonce'))
      .where('chain_id', '=', transfer.chain_id)
      .where('from_address', '=', transfer.from_address)
      .executeTakeFirst();
    const fromDb = highest?.nonce === null || highest?.nonce === undefined ? 0n : BigInt(highest.nonce) + 1n;
    const fromChain = await this.deps.chain.pendingNonce();
    return fromDb > fromChain ? fromDb : fromChain;
  }
}
