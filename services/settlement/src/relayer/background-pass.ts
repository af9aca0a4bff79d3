import type { ServiceContext } from '@paygate/runtime';
import { Transaction } from 'ethers';
import { sql } from 'kysely';
import { broadcastCounted, larger, OPEN_BATCH, type SettlementDB } from '../db';
import type { ExecutedTransfer, FeeCaps, RelayerChain } from './chain';
import type { RelayerSigner, SignerPool } from './pool';
import type { RecordedAuthorizations } from './recorded';
import { cappedFees, isFinished, type RelayerSettings, type Row } from './settings';

/** The relayer's background pass and crash recovery: watch, rebroadcast, finish or fee-bump each key's rows. */
export class RelayerBackgroundPass {
  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    private readonly chain: RelayerChain,
    private readonly pool: SignerPool,
    private readonly settings: RelayerSettings,
    private readonly recorded: RecordedAuthorizations,
    private readonly isStopped: () => boolean,
  ) {}

  async runOnce(): Promise<void> {
    for (const signer of this.pool.signers) {
      if (this.isStopped()) return;
      await this.watchConfirmed(signer);
      await this.runOpen(signer);
    }
    if (!this.isStopped()) await this.runOpen(undefined);
  }

  /** The open rows of one key (or, undefined, of keys no longer in the pool); then the key's stuck mark. */
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
    for (const row of open) {
      if (this.isStopped()) return;
      const advanced = await this.recorded.advance(row);
      if (isFinished(advanced)) continue;
      // A rebroadcast or a fee bump does not make it any less stuck.
      const sentAt = (advanced.signed_at ?? advanced.created_at).getTime();
      oldestOpenAt = Math.min(oldestOpenAt ?? sentAt, sentAt);
      highestOpenNonce = larger(highestOpenNonce ?? 0n, advanced.relayer_nonce!);
      if (advanced.status === 'broadcast' && signer) await this.bumpIfStuck(advanced, signer.chain);
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
    const wasStuck = signer.markedStuck(Date.now());
    signer.markOpen(oldestOpenAt, highestOpenNonce);
    const isStuck = signer.markedStuck(Date.now());
    if (isStuck !== wasStuck) {
      this.ctx.logger.warn(
        { relayer: signer.address, since: oldestOpenAt ? new Date(oldestOpenAt).toISOString() : null },
        isStuck
          ? 'relayer key stuck: a transaction waits for its receipt; new submissions go to the other keys'
          : 'relayer key no longer stuck',
      );
    }
  }

  /** Confirmed rows until final: one a reorg dropped is sent again as the SAME bytes, never re-signed. */
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
      if (minedNonce > row.relayer_nonce!) {
        // Consumed by another version of the nonce, or a lagging node: look again next pass.
        this.ctx.logger.warn(
          { id: row.id, txHash: hash, relayerNonce: row.relayer_nonce!.toString() },
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
      // The ledger's chain check reverses what x402 booked for it.
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
      // An earlier fee bump's bytes are not kept: the ledger's chain check decides on the hash x402 booked.
      this.ctx.logger.error(
        { id: row.id, txHash: hash, latestTxHash: row.tx_hash },
        'a reorg dropped a relayed authorization mined under an earlier fee bump; sending its latest version',
      );
    }
    this.ctx.logger.warn(
      { id: row.id, txHash: hash, relayerNonce: row.relayer_nonce!.toString() },
      'relayed authorization dropped by a reorg; broadcasting the recorded transaction again',
    );
    if ((await this.recorded.send(row, 'rebroadcast after a reorg failed; will retry')) !== undefined) return;
    await this.ctx.db
      .updateTable('relayed_authorizations')
      .set(broadcastCounted({ reorg: true }))
      .where('id', '=', row.id)
      .execute();
  }

  /** A broadcast stuck past feeBumpAfterMs is re-signed on the same relayer nonce with higher fees (bounded). */
  private async bumpIfStuck(row: Row, key: RelayerChain): Promise<void> {
    const sentAt = row.last_broadcast_at?.getTime() ?? 0;
    if (Date.now() - sentAt < this.settings.feeBumpAfterMs) return;
    // Behind an unmined earlier nonce higher fees cannot help; past the bumps or at the cap: keep what we have.
    const behindGap = (await key.minedNonce()) < row.relayer_nonce!;
    const previous = {
      maxFeePerGas: BigInt(row.max_fee_per_gas ?? '0'),
      maxPriorityFeePerGas: BigInt(row.max_priority_fee_per_gas ?? '0'),
    };
    const bumped =
      behindGap || row.fee_bumps >= this.settings.maxFeeBumps
        ? undefined
        : this.bumpedFees(previous, await this.chain.suggestedFees());
    if (!bumped || bumped.maxFeePerGas <= previous.maxFeePerGas) {
      await this.recorded.broadcastRecorded(row);
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
    const raised = (fee: bigint, suggestion: bigint) => larger((fee * 125n) / 100n + 1n, suggestion);
    return cappedFees(
      {
        maxFeePerGas: raised(previous.maxFeePerGas, suggested.maxFeePerGas),
        maxPriorityFeePerGas: raised(previous.maxPriorityFeePerGas, suggested.maxPriorityFeePerGas),
      },
      this.settings.maxFeePerGasCapWei,
    );
  }

  /** Re-signed on the same nonce and recorded (earlier hashes kept), unless the row moved on meanwhile. */
  private async resign(row: Row, bumped: FeeCaps, key: RelayerChain): Promise<Row | undefined> {
    const signed = await key.sign({
      to: row.token_address,
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
