import type { RelayerSubmitRequest } from '@paygate/contracts';
import type { ServiceContext } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
import { advisoryLockKey, larger, type SettlementDB } from '../db';
import type { FeeCaps, RelayerChain } from './chain';
import type { RecordedAuthorizations } from './recorded';
import { cappedFees, type RelayerSettings, type Row } from './settings';

const RECORD_BATCH_MAX = 50;

export interface ChainState {
  pendingNonce: bigint;
  fees: FeeCaps;
}

/** A simulated submission to sign: its calldata, the gas it used, and the chain as read before the lock. */
interface Submission {
  request: RelayerSubmitRequest;
  data: string;
  gas: bigint;
  chainState: ChainState;
  payerCodeHash: string | null;
}

interface PendingRecord extends Submission {
  resolve(row: Row): void;
  reject(error: unknown): void;
}

const keyOf = (request: RelayerSubmitRequest) =>
  `${request.authorization.from.toLowerCase()}:${request.authorization.nonce.toLowerCase()}`;

/** One key's nonce allocator (its advisory lock across replicas): submissions signed and committed in batches. */
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
    this.lockKey = advisoryLockKey(
      `settlement-relayer:${settings.dbSchema}:${settings.chainId}:${chain.address.toLowerCase()}`,
    );
  }

  /** The submission's signed row, committed with its batch under the lock; the caller broadcasts after it. */
  record(submission: Submission): Promise<Row> {
    return new Promise<Row>((resolve, reject) => {
      this.waiting.push({ ...submission, resolve, reject });
      if (!this.allocating) void this.allocate();
    });
  }

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
      // Read before the lock, still a lower bound: only this key's own recorded transactions move it.
      for (const { chainState } of batch) nonce = larger(nonce, chainState.pendingNonce);
      const fresh: RelayerSubmitRequest[] = [];
      const values = [];
      for (const { request, data, gas, chainState, payerCodeHash } of batch) {
        const key = keyOf(request);
        if (recorded.has(key) || fresh.some((r) => keyOf(r) === key)) continue;
        const fees = cappedFees(chainState.fees, this.settings.maxFeePerGasCapWei);
        const gasLimit = (gas * 13n) / 10n;
        const signed = await this.chain.sign({ to: request.token, data, nonce, gasLimit, fees });
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

  private async nextRecordedNonce(trx: Transaction<SettlementDB>): Promise<bigint> {
    const highest = await trx
      .selectFrom('relayed_authorizations')
      .select((eb) => eb.fn.max('relayer_nonce').as('nonce'))
      .where('chain_id', '=', this.settings.chainId)
      .where('relayer_address', '=', this.chain.address.toLowerCase())
      .executeTakeFirst();
    return highest?.nonce == null ? 0n : BigInt(highest.nonce) + 1n;
  }
}
