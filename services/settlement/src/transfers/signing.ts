import { formatUsdc, parseChainUsdc } from '@paygate/money';
import { type BackoffPolicy, backoffDelayMs } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
import { crashIfConfigured } from '../config';
import { larger, type SettlementDB } from '../db';
import { describe, EscrowShortError } from '../errors';
import { TransferRefusal } from '../reasons';
import type { ConfirmationWatch } from './confirmation-watch';
import type { TransferRow } from './repository';
import type { TransferWorkerDeps } from './worker';

const SIGN_BATCH = 20;
/**
 * Pre-flight retries: 2 s, 4 s, ... up to 5 min, without jitter: with MAX_PREFLIGHT_ATTEMPTS they set how long escrow
 * has to become able to pay (a sweep on its way), which jitter would shorten at random.
 */
const PREFLIGHT_BACKOFF: BackoffPolicy = { baseMs: 2000, maxMs: 5 * 60_000 };
const AT_CEILING = () => 1;

/** `created` transfers: pre-flight, nonce, signature and COMMIT under the escrow key's lock, before any broadcast. */
export class TransferSigner {
  constructor(
    private readonly deps: TransferWorkerDeps,
    private readonly lockKey: string,
    private readonly watch: ConfirmationWatch,
  ) {}

  async signCreated(): Promise<void> {
    const { ctx, config } = this.deps;
    const due = await ctx.db
      .selectFrom('outgoing_transfers')
      .select(['transfer_id', 'amount_micro'])
      .where('status', '=', 'created')
      .where('chain_id', '=', config.chainId)
      .where('next_attempt_at', '<=', new Date())
      .orderBy('created_at')
      .limit(SIGN_BATCH)
      .execute();
    const capMicro = parseChainUsdc(config.maxTransferUsdc);
    for (const { transfer_id, amount_micro } of due) {
      if (this.deps.isStopped()) return;
      if (amount_micro > capMicro) {
        await this.failAboveCap(
          transfer_id,
          `${formatUsdc(amount_micro)} USDC is above MAX_TRANSFER_USDC (${formatUsdc(capMicro)})`,
        );
        continue;
      }
      const signed = await this.signAndRecord(transfer_id);
      if (!signed) continue;
      crashIfConfigured(config, 'after_record');
      await this.watch.broadcastRecorded(signed);
    }
  }

  /** Above MAX_TRANSFER_USDC, whatever the ledger decided: failed unsigned, its owner told in one transaction. */
  private async failAboveCap(transferId: string, message: string): Promise<void> {
    const { ctx, metrics, handlers } = this.deps;
    const refusal = TransferRefusal.ExceedsTransferCap;
    const reason = `not sent: ${refusal}: ${message}`;
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
    metrics.transfersRefused.inc({ kind: failed.kind, reason: refusal });
    metrics.transfersFailed.inc({ kind: failed.kind });
    ctx.logger.error(
      {
        transferId,
        kind: failed.kind,
        key: failed.idempotency_key,
        to: failed.to_address,
        amount: formatUsdc(failed.amount_micro),
        reason: refusal,
      },
      'transfer out of escrow refused before signing',
    );
  }

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

  /** Retried with backoff, or after MAX_PREFLIGHT_ATTEMPTS failed (its owner told): then the failed row. */
  private async recordPreflightFailure(
    trx: Transaction<SettlementDB>,
    transfer: TransferRow,
    error: unknown,
  ): Promise<TransferRow | undefined> {
    const transferId = transfer.transfer_id;
    const attempts = transfer.preflight_attempts + 1;
    const reason = `pre-flight failed: ${describe(error, 500)}`;
    const givenUp = attempts >= this.deps.config.maxPreflightAttempts;
    const delayMs = givenUp ? 0 : backoffDelayMs(attempts, PREFLIGHT_BACKOFF, AT_CEILING)!;
    const updated = await trx
      .updateTable('outgoing_transfers')
      .set({
        preflight_attempts: attempts,
        last_error: reason,
        ...(givenUp
          ? { status: 'failed', failed_at: new Date() }
          : { next_attempt_at: new Date(Date.now() + delayMs) }),
      })
      .where('transfer_id', '=', transferId)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (givenUp) {
      await this.deps.handlers[updated.kind].onFailed(trx, updated, reason);
      return updated;
    }
    this.deps.ctx.logger.warn({ transferId, attempts, reason }, 'transfer pre-flight failed; will retry');
    return undefined;
  }

  /** Escrow's mined USDC less its unmined recorded transfers must cover this one (a gas estimate may not: README). */
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
    const fromDb = highest?.nonce == null ? 0n : BigInt(highest.nonce) + 1n;
    return larger(fromDb, await this.deps.chain.pendingNonce());
  }
}
