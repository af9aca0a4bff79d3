import type { ServiceContext } from '@paygate/runtime';
import { Transaction } from 'ethers';
import { sql } from 'kysely';
import type { SettlementDB } from '../db';
import type { ExecutedTransfer, FeeCaps, RelayerChain } from './chain';
import type { RelayerSigner, SignerPool } from './pool';
import type { RecordedAuthorizations } from './recorded';
import {
  cappedFees,
  describe,
  isFinished,
  larger,
  OPEN_BATCH,
  type RelayerSettings,
  type Row,
} from './settings';

/**
 * The relayer's background pass, which is also its crash recovery, key by key of the pool: confirmed rows watched
 * through the reorg window (and sent again, same bytes, if a reorg drops them), then open rows rebroadcast, finished
 * from their receipts, or fee-bumped on the same nonce (signed by the row's key) when stuck. Rows of a key no longer
 * configured are still rebroadcast and finished (never bumped: nothing here can sign for it).
 */
export class RelayerBackgroundPass {
  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    /** Reads and broadcasts (the provider the keys share). */
    private readonly chain: RelayerChain,
    private readonly pool: SignerPool,
    private readonly settings: RelayerSettings,
    private readonly recorded: RecordedAuthorizations,
    /** True once the relayer's loop is stopping: a pass returns between two rows. */
    private readonly isStopped: () => boolean,
  ) {}

  /** One background pass: per key, first what a reorg took off the chain (the lowest nonces), then what is open. */
  async runOnce(): Promise<void> {
    for (const signer of this.pool.signers) {
      if (this.isStopped()) return;
      await this.watchConfirmed(signer);
      await this.runOpen(signer);
    }
    if (!this.isStopped()) await this.runOpen(undefined);
  }

  /**
   * The open rows of one key (OPEN_BATCH at most, lowest nonces first), or with `signer` undefined those of keys
   * no longer in the pool. Afterwards the key is marked stuck while its oldest open transaction was signed longer
   * than RELAYER_STUCK_AFTER_MS ago (new submissions go to the other keys meanwhile).
   */
  private async runOpen(signer: RelayerSigner | undefined): Promise<void> {
    const configured = this.pool.signers.map((s) => s.address);
    const open = await this.ctx.db
      .selectFrom('relayed_authorizations')
      .selectAll()
      .where('status', 'in', ['signed', 'broadcast'])
      .where('chain_id', '=', this.settings.chainId)
      .where((eb) =>
        signer ? eb('relayer_address', '=', signer.address) : eb('relayer_address', 'not in', configured),
      )
      .orderBy('relayer_nonce')
      .limit(OPEN_BATCH)
      .execute();
    let oldestOpenAt: number | undefined;
    let highestOpenNonce: bigint | undefined;
    /** A row still open without a relayer nonce: its mark cannot be cleared by the nonces mined. */
    let unnumbered = false;
    for (const row of open) {
      if (this.isStopped()) return;
      const advanced = await this.recorded.advance(row);
      if (!advanced || isFinished(advanced)) continue;
      // Since it was first signed: a rebroadcast or a fee bump does not make it any less stuck.
      const sentAt = (advanced.signed_at ?? advanced.created_at).getTime();
      oldestOpenAt = Math.min(oldestOpenAt ?? sentAt, sentAt);
      if (advanced.relayer_nonce === null) unnumbered = true;
      else if (highestOpenNonce === undefined || advanced.relayer_nonce > highestOpenNonce)
        highestOpenNonce = advanced.relayer_nonce;
      if (advanced.status === 'signed') await this.recorded.broadcastRecorded(advanced);
      else if (signer) await this.bumpIfStuck(advanced, signer.chain);
      else await this.recorded.broadcastRecorded(advanced);
    }
    if (!signer) {
      if (open.length > 0) {
        this.ctx.logger.warn(
          { rows: open.length, relayers: [...new Set(open.map((row) => row.relayer_address))] },
          'relayed authorizations of keys no longer configured: rebroadcast, never fee-bumped',
        );
      }
      return;
    }
    const wasStuck =
      signer.stuckSince !== undefined && Date.now() - signer.stuckSince >= this.settings.stuckAfterMs;
    signer.markOpen(oldestOpenAt, unnumbered ? undefined : highestOpenNonce);
    const isStuck = oldestOpenAt !== undefined && Date.now() - oldestOpenAt >= this.settings.stuckAfterMs;
    if (isStuck !== wasStuck) {
      this.ctx.logger.warn(
        { relayer: signer.address, since: oldestOpenAt ? new Date(oldestOpenAt).toISOString() : null },
        isStuck
          ? 'relayer key stuck: a transaction waits for its receipt; new submissions go to the other keys'
          : 'relayer key no longer stuck',
      );
    }
  }

  /**
   * Confirmed submissions not yet CONFIRMATIONS deep: one whose receipt is gone (a reorg dropped it) while its
   * relayer nonce is not consumed is broadcast again with the SAME signed bytes, so the same transaction hash
   * (the one x402 booked) is mined again and every later relayer nonce, waiting behind the gap, can be mined.
   * Never re-signed: another hash would be another transfer for the ledger. Bounded: OPEN_BATCH rows a pass.
   */
  private async watchConfirmed(signer: RelayerSigner): Promise<void> {
    const watched = await this.ctx.db
      .selectFrom('relayed_authorizations')
      .selectAll()
      .where('status', '=', 'confirmed')
      .where('final_at', 'is', null)
      .where('chain_id', '=', this.settings.chainId)
      .where('relayer_address', '=', signer.address)
      .orderBy('relayer_nonce')
      .limit(OPEN_BATCH)
      .execute();
    if (watched.length === 0) return;
    const head = await this.chain.blockNumber();
    let minedNonce: bigint | undefined;
    for (const row of watched) {
      if (this.isStopped()) return;
      const hash = row.settled_tx_hash!;
      const executed = await this.chain.executed(hash, row.payer, row.to_address);
      if (executed) {
        await this.recordConfirmedDepth(row, executed, head);
        continue;
      }
      minedNonce ??= await signer.chain.minedNonce();
      if (row.relayer_nonce === null || minedNonce > row.relayer_nonce) {
        // The nonce was consumed, but not by this hash: an earlier or later version of the same nonce, or
        // nothing of ours. A null receipt can also be a lying or lagging node; look again next pass.
        this.ctx.logger.warn(
          { id: row.id, txHash: hash, relayerNonce: row.relayer_nonce?.toString() },
          'confirmed relayed authorization has no receipt but its relayer nonce is used; watching',
        );
        continue;
      }
      await this.resendDroppedConfirmed(row, hash);
    }
  }

  /** A watched row still mined: its block and log kept up to date, final once CONFIRMATIONS deep. */
  private async recordConfirmedDepth(row: Row, executed: ExecutedTransfer, head: bigint): Promise<void> {
    const hash = row.settled_tx_hash!;
    if (executed.reverted) {
      // Mined again after the reorg but reverted (the authorization expired meanwhile): the payment is not on
      // the chain; the ledger's chain check reverses what x402 booked for it.
      this.ctx.logger.error(
        { id: row.id, txHash: hash },
        'relayed authorization mined again after a reorg but reverted; the payment is not on chain',
      );
    }
    const depth = head - executed.blockNumber + 1n;
    const moved = executed.blockNumber !== row.block_number || executed.logIndex !== row.log_index;
    if (depth >= BigInt(this.settings.confirmations) || moved) {
      await this.ctx.db
        .updateTable('relayed_authorizations')
        .set({
          block_number: executed.blockNumber,
          log_index: executed.logIndex,
          ...(depth >= BigInt(this.settings.confirmations) ? { final_at: new Date() } : {}),
        })
        .where('id', '=', row.id)
        .execute();
    }
  }

  /** A confirmed row a reorg dropped, its relayer nonce not consumed: its recorded bytes are sent again. */
  private async resendDroppedConfirmed(row: Row, hash: string): Promise<void> {
    if (hash !== row.tx_hash || !row.raw_tx) {
      // The mined version was an earlier fee bump whose bytes are not kept: the latest version (same nonce,
      // same authorization) is sent instead; x402 booked the other hash, so the ledger's chain check decides.
      this.ctx.logger.error(
        { id: row.id, txHash: hash, latestTxHash: row.tx_hash },
        'a reorg dropped a relayed authorization mined under an earlier fee bump; sending its latest version',
      );
    }
    this.ctx.logger.warn(
      { id: row.id, txHash: hash, relayerNonce: row.relayer_nonce!.toString() },
      'relayed authorization dropped by a reorg; broadcasting the recorded transaction again',
    );
    try {
      await this.chain.broadcast(row.raw_tx!, row.tx_hash!);
    } catch (error) {
      this.ctx.logger.warn(
        { id: row.id, txHash: row.tx_hash, reason: describe(error) },
        'rebroadcast after a reorg failed; will retry',
      );
      return;
    }
    await this.ctx.db
      .updateTable('relayed_authorizations')
      .set((eb) => ({
        last_broadcast_at: new Date(),
        reorg_rebroadcasts: eb('reorg_rebroadcasts', '+', 1),
        broadcast_attempts: eb('broadcast_attempts', '+', 1),
      }))
      .where('id', '=', row.id)
      .execute();
  }

  /** A broadcast stuck past feeBumpAfterMs is re-signed on the same relayer nonce with higher fees (bounded). */
  private async bumpIfStuck(row: Row, key: RelayerChain): Promise<void> {
    const sentAt = row.last_broadcast_at?.getTime() ?? 0;
    if (Date.now() - sentAt < this.settings.feeBumpAfterMs) return;
    if (row.relayer_nonce !== null && (await key.minedNonce()) < row.relayer_nonce) {
      // An earlier relayer nonce is not mined (it waits, or a reorg dropped it and watchConfirmed sends it
      // again): higher fees cannot move this one past the gap, so it is only kept in the node's pool.
      await this.recorded.broadcastRecorded(row);
      return;
    }
    if (row.fee_bumps >= this.settings.maxFeeBumps) {
      await this.recorded.broadcastRecorded(row); // keep the last version alive
      return;
    }
    const previous = {
      maxFeePerGas: BigInt(row.max_fee_per_gas ?? '0'),
      maxPriorityFeePerGas: BigInt(row.max_priority_fee_per_gas ?? '0'),
    };
    const bumped = this.bumpedFees(previous, await this.chain.suggestedFees());
    if (bumped.maxFeePerGas <= previous.maxFeePerGas) {
      await this.recorded.broadcastRecorded(row); // at the cap: rebroadcast what we have
      return;
    }
    const updated = await this.resign(row, bumped, key);
    if (!updated) return;
    this.ctx.logger.warn(
      { id: row.id, previousTxHash: row.tx_hash, txHash: updated.tx_hash, bumps: updated.fee_bumps },
      'relayed authorization stuck; fees bumped on the same relayer nonce',
    );
    await this.recorded.broadcastRecorded(updated);
  }

  /** Nodes replace a pending transaction only for at least +10% on both caps; +25% leaves room. */
  private bumpedFees(previous: FeeCaps, suggested: FeeCaps): FeeCaps {
    return cappedFees(
      {
        maxFeePerGas: larger((previous.maxFeePerGas * 125n) / 100n + 1n, suggested.maxFeePerGas),
        maxPriorityFeePerGas: larger(
          (previous.maxPriorityFeePerGas * 125n) / 100n + 1n,
          suggested.maxPriorityFeePerGas,
        ),
      },
      this.settings.maxFeePerGasCapWei,
    );
  }

  /**
   * Signs the same authorization on the same relayer nonce with the bumped fees and records it (every earlier
   * hash kept), unless the row moved on meanwhile (then undefined).
   */
  private async resign(row: Row, bumped: FeeCaps, key: RelayerChain): Promise<Row | undefined> {
    const signed = await key.sign({
      tokenAddress: row.token_address,
      // The calldata signed and simulated before, as it was: only the fees change.
      data: Transaction.from(row.raw_tx!).data,
      nonce: row.relayer_nonce!,
      gasLimit: row.gas_limit!,
      fees: bumped,
    });
    return this.ctx.db
      .updateTable('relayed_authorizations')
      .set((eb) => ({
        status: 'signed',
        raw_tx: signed.rawTx,
        tx_hash: signed.txHash,
        earlier_tx_hashes: sql<string[]>`array_append(earlier_tx_hashes, ${row.tx_hash})`,
        max_fee_per_gas: bumped.maxFeePerGas.toString(),
        max_priority_fee_per_gas: bumped.maxPriorityFeePerGas.toString(),
        fee_bumps: eb('fee_bumps', '+', 1),
      }))
      .where('id', '=', row.id)
      .where('status', '=', 'broadcast')
      .where('tx_hash', '=', row.tx_hash)
      .returningAll()
      .executeTakeFirst();
  }
}
