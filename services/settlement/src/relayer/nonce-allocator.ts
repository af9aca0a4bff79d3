import { createHash } from 'node:crypto';
import type { RelayerSubmitRequest } from '@paygate/contracts';
import type { ServiceContext } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
import type { SettlementDB } from '../db';
import type { FeeCaps, RelayerChain } from './chain';
import type { RecordedAuthorizations } from './recorded';
import { cappedFees, larger, type RelayerSettings, type Row } from './settings';

/** Submissions signed and recorded in one transaction of the nonce allocator, at most. */
const RECORD_BATCH_MAX = 50;

export interface ChainState {
  pendingNonce: bigint;
  fees: FeeCaps;
}

interface PendingRecord {
  request: RelayerSubmitRequest;
  data: string;
  gas: bigint;
  chainState: ChainState;
  /** The payer's code hash as read for this submission (null: no code). */
  payerCodeHash: string | null;
  resolve(row: Row): void;
  reject(error: unknown): void;
}

const keyOf = (request: RelayerSubmitRequest) =>
  `${request.authorization.from.toLowerCase()}:${request.authorization.nonce.toLowerCase()}`;

/**
 * The nonce allocator of one key of the relayer's pool (an advisory lock per key across replicas): waiting
 * submissions are signed and committed in batches, one transaction each, consecutive nonces of that key, nothing
 * broadcast here. Each key's lock and sequence are its own, so the keys sign side by side.
 */
export class NonceAllocator {
  private readonly lockKey: string;
  private readonly waiting: PendingRecord[] = [];
  private allocating = false;

  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    private readonly chain: RelayerChain,
    private readonly settings: RelayerSettings,
    private readonly recorded: RecordedAuthorizations,
  ) {
    const digest = createHash('sha256')
      .update(`settlement-relayer:${settings.dbSchema}:${settings.chainId}:${chain.address.toLowerCase()}`)
      .digest();
    this.lockKey = BigInt.asIntN(64, BigInt(`0x${digest.subarray(0, 8).toString('hex')}`)).toString();
  }

  /**
   * Records the signed transaction of a submission: joins the next batch of the nonce allocator, which signs and
   * commits every waiting submission in one transaction under the relayer's lock (which holds no RPC: the chain's
   * pending nonce and fees are read before it). A concurrent submission of the same authorization finds the row
   * (or its twin in the batch) instead and sends nothing. The caller broadcasts after the commit, outside the
   * lock, so a crash between the two leaves a recorded transaction that the background pass rebroadcasts.
   */
  record(
    request: RelayerSubmitRequest,
    data: string,
    gas: bigint,
    chainState: ChainState,
    payerCodeHash: string | null,
  ): Promise<Row> {
    return new Promise<Row>((resolve, reject) => {
      this.waiting.push({ request, data, gas, chainState, payerCodeHash, resolve, reject });
      if (!this.allocating) void this.allocate();
    });
  }

  /** Drains the waiting submissions, one batch (at most RECORD_BATCH_MAX) per transaction, until none wait. */
  private async allocate(): Promise<void> {
    this.allocating = true;
    try {
      for (let round = 0; round < 100_000 && this.waiting.length > 0; round++) {
        const batch = this.waiting.splice(0, RECORD_BATCH_MAX);
        try {
          const rows = await this.recordBatch(batch);
          for (const [i, item] of batch.entries()) item.resolve(rows[i]!);
        } catch (error) {
          for (const item of batch) item.reject(error);
        }
      }
    } finally {
      this.allocating = false;
      if (this.waiting.length > 0) void this.allocate();
    }
  }

  /** One transaction: the lock, the rows already recorded, consecutive nonces for the rest, signed, inserted. */
  private async recordBatch(batch: readonly PendingRecord[]): Promise<Row[]> {
    return this.ctx.inTransaction(async (trx) => {
      await sql`select pg_advisory_xact_lock(${this.lockKey}::bigint)`.execute(trx);
      const recorded = await this.recordedOf(trx, batch);
      let nonce = await this.nextRecordedNonce(trx);
      // Read before the lock: a lower bound still (only this relayer's own transactions, all recorded here,
      // move it), so the larger of the two is the next free nonce.
      for (const { chainState } of batch) nonce = larger(nonce, chainState.pendingNonce);
      const fresh: RelayerSubmitRequest[] = [];
      const values = [];
      for (const { request, data, gas, chainState, payerCodeHash } of batch) {
        const key = keyOf(request);
        if (recorded.has(key) || fresh.some((r) => keyOf(r) === key)) continue;
        const fees = cappedFees(chainState.fees, this.settings.maxFeePerGasCapWei);
        const gasLimit = (gas * 13n) / 10n;
        const signed = await this.chain.sign({ tokenAddress: request.token, data, nonce, gasLimit, fees });
        fresh.push(request);
        values.push({
          ...this.recorded.authorizationColumns(request, this.chain.address),
          payer_code_hash: payerCodeHash,
          status: 'signed' as const,
          relayer_nonce: nonce,
          gas_limit: gasLimit,
          raw_tx: signed.rawTx,
          tx_hash: signed.txHash,
          max_fee_per_gas: fees.maxFeePerGas.toString(),
          max_priority_fee_per_gas: fees.maxPriorityFeePerGas.toString(),
          signed_at: new Date(),
        });
        nonce += 1n;
      }
      if (values.length > 0) {
        const inserted = await trx
          .insertInto('relayed_authorizations')
          .values(values)
          .returningAll()
          .execute();
        for (const row of inserted) recorded.set(`${row.payer}:${row.auth_nonce}`, row);
      }
      return batch.map(({ request }) => recorded.get(keyOf(request))!);
    });
  }

  /** The rows already recorded for the batch's authorizations, by payer:nonce. */
  private async recordedOf(
    trx: Transaction<SettlementDB>,
    batch: readonly PendingRecord[],
  ): Promise<Map<string, Row>> {
    const recorded = new Map<string, Row>();
    const existing = await trx
      .selectFrom('relayed_authorizations')
      .selectAll()
      .where('chain_id', '=', this.settings.chainId)
      .where('token_address', '=', this.settings.usdcAddress.toLowerCase())
      .where((eb) =>
        eb.or(
          batch.map(({ request }) =>
            eb.and([
              eb('payer', '=', request.authorization.from.toLowerCase()),
              eb('auth_nonce', '=', request.authorization.nonce.toLowerCase()),
            ]),
          ),
        ),
      )
      .execute();
    for (const row of existing) recorded.set(`${row.payer}:${row.auth_nonce}`, row);
    return recorded;
  }

  /** One past the highest relayer nonce recorded (under the lock), 0 for none. */
  private async nextRecordedNonce(trx: Transaction<SettlementDB>): Promise<bigint> {
    const highest = await trx
      .selectFrom('relayed_authorizations')
      .select((eb) => eb.fn.max('relayer_nonce').as('nonce'))
      .where('chain_id', '=', this.settings.chainId)
      .where('relayer_address', '=', this.chain.address.toLowerCase())
      .executeTakeFirst();
    return highest?.nonce === null || highest?.nonce === undefined ? 0n : BigInt(highest.nonce) + 1n;
  }
}
