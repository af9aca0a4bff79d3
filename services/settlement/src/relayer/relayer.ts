import { createHash } from 'node:crypto';
import { type RpcServer, serveRpcs } from '@paygate/bus';
import {
  newEventId,
  type RelayerStatusReply,
  type RelayerSubmitReply,
  type RelayerSubmitRequest,
} from '@paygate/contracts';
import { type BackgroundTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import { type Selectable, sql } from 'kysely';
import type { SettlementDB } from '../db';
import { type FeeCaps, type RelayerChain, SimulationError } from './chain';
import type { RelayedAuthorizationsTable } from './tables';

type Row = Selectable<RelayedAuthorizationsTable>;
type Refusal = Extract<RelayerSubmitReply, { ok: false }>;

export interface RelayerSettings {
  chainId: number;
  usdcAddress: string;
  escrowAddress: string;
  /** Below this native balance the relayer refuses new work (x402 is then not offered). */
  minBalanceWei: bigint;
  /** A broadcast without a receipt after this long is re-signed with higher fees (same relayer nonce). */
  feeBumpAfterMs: number;
  maxFeeBumps: number;
  /** Never pay more than this per gas, whatever the bumps. */
  maxFeePerGasCapWei: bigint;
  /** How often receipts are polled while a caller waits for inclusion. */
  receiptPollMs: number;
  /** How often the background pass rebroadcasts, bumps and finishes what is recorded. */
  pollIntervalMs: number;
  /** Blocks searched for someone else's use of an authorization. */
  lookbackBlocks: number;
  /**
   * CONFIRMATIONS: a confirmed submission is answered on its first receipt (x402 books it then), so its receipt is
   * watched until it is this deep; a reorg that drops it before then has it broadcast again (same bytes).
   */
  confirmations: number;
  dbSchema: string;
}

const OPEN_BATCH = 100;
const BALANCE_CACHE_MS = 2000;
const FEES_CACHE_MS = 1000;
/** Submissions signed and recorded in one transaction of the nonce allocator, at most. */
const RECORD_BATCH_MAX = 50;

interface PendingRecord {
  request: RelayerSubmitRequest;
  data: string;
  gas: bigint;
  chainState: { pendingNonce: bigint; fees: FeeCaps };
  resolve(row: Row): void;
  reject(error: unknown): void;
}

function describe(error: unknown): string {
  const e = error as { shortMessage?: string; message?: string };
  return String(e?.shortMessage ?? e?.message ?? error).slice(0, 300);
}

const refusal = (reason: Refusal['reason'], message: string): Refusal => ({ ok: false, reason, message });
const NO_TIME = { checksMs: 0, simulationMs: 0 };
const smaller = (a: bigint, b: bigint) => (a < b ? a : b);
const larger = (a: bigint, b: bigint) => (a > b ? a : b);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Submits x402 payments' EIP-3009 authorizations with a gas-only key, exactly once per authorization:
 * one row per (chain, token, payer, nonce), the signed transaction recorded before it is broadcast, one relayer
 * nonce allocator (advisory lock across replicas), fee bumps that keep every earlier hash, and a background pass
 * that rebroadcasts, bumps and finishes whatever is recorded (which is also the crash recovery).
 */
export class Relayer implements BackgroundTask {
  private readonly loop: PollingLoop;
  private readonly lockKey: string;
  private server: RpcServer | undefined;
  private balance: { wei: bigint; at: number } | undefined;
  private fees: { caps: Promise<FeeCaps>; at: number } | undefined;
  private readonly waiting: PendingRecord[] = [];
  private allocating = false;
  /** Rows being finished after their caller was answered: awaited on stop. */
  private readonly finishing = new Set<Promise<unknown>>();

  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    private readonly chain: RelayerChain,
    private readonly settings: RelayerSettings,
  ) {
    const digest = createHash('sha256')
      .update(`settlement-relayer:${settings.dbSchema}:${settings.chainId}:${chain.address.toLowerCase()}`)
      .digest();
    this.lockKey = BigInt.asIntN(64, BigInt(`0x${digest.subarray(0, 8).toString('hex')}`)).toString();
    this.loop = new PollingLoop(() => this.runOnce(), {
      what: 'relayer pass',
      logger: ctx.logger,
      intervalMs: settings.pollIntervalMs,
    });
  }

  async start(): Promise<void> {
    this.server = await serveRpcs(
      this.ctx.bus,
      'settlement',
      {
        'relayer.submit_authorization': (request) => this.submit(request),
        'relayer.status': () => this.status(),
      },
      this.ctx.logger,
    );
    this.loop.start();
  }

  async stop(): Promise<void> {
    await this.server?.stop();
    await this.loop.stop();
    await Promise.allSettled([...this.finishing]);
  }

  async status(): Promise<RelayerStatusReply> {
    try {
      const wei = await this.balanceWei();
      const available = wei >= this.settings.minBalanceWei;
      return {
        available,
        address: this.chain.address,
        balanceWei: wei.toString(),
        reason: available ? null : `relayer balance ${wei} wei is below ${this.settings.minBalanceWei} wei`,
      };
    } catch (error) {
      return { available: false, address: this.chain.address, balanceWei: '0', reason: describe(error) };
    }
  }

  private async balanceWei(): Promise<bigint> {
    if (this.balance && Date.now() - this.balance.at < BALANCE_CACHE_MS) return this.balance.wei;
    const wei = await this.chain.balanceWei();
    this.balance = { wei, at: Date.now() };
    return wei;
  }

  /** Submits (once) and waits up to waitForReceiptMs for the receipt. */
  async submit(request: RelayerSubmitRequest): Promise<RelayerSubmitReply> {
    const started = performance.now();
    const a = request.authorization;
    if (request.chainId !== this.settings.chainId) {
      return refusal('invalid_request', `this relayer submits on chain ${this.settings.chainId}`);
    }
    if (request.token.toLowerCase() !== this.settings.usdcAddress.toLowerCase()) {
      return refusal('invalid_request', `this relayer submits USDC at ${this.settings.usdcAddress} only`);
    }
    if (a.to.toLowerCase() !== this.settings.escrowAddress.toLowerCase()) {
      return refusal('invalid_request', 'this relayer submits payments into the escrow wallet only');
    }
    const data = this.chain.callData(a, request.signature);
    // The lookup, the simulation and what the nonce allocation needs from the chain (pending nonce, fees) run
    // side by side: none of them spends anything, and the nonce lock then holds no RPC, so a burst is signed
    // back to back and enters the pool together (one block, not two).
    const found = this.find(request);
    const simulation = this.chain.simulate(request.token, data).then(
      (gas) => ({ gas }),
      (error: unknown) => ({ error }),
    );
    const chainNonce = this.chain.pendingNonce();
    const fees = this.currentFees();
    chainNonce.catch(() => undefined);
    fees.catch(() => undefined);
    const existing = await found;
    if (existing) return this.answerFor(existing, request, started, NO_TIME);

    let wei: bigint;
    try {
      wei = await this.balanceWei();
    } catch (error) {
      return refusal('chain_unavailable', `the chain RPC did not answer: ${describe(error)}`);
    }
    if (wei < this.settings.minBalanceWei) {
      this.ctx.logger.error(
        { relayer: this.chain.address, balanceWei: wei.toString() },
        'relayer is out of gas; x402 submissions refused',
      );
      return refusal(
        'relayer_out_of_gas',
        'the relayer cannot pay gas right now; pay with a tx-hash proof instead',
      );
    }
    const checked = performance.now();
    const outcomeOfSimulation = await simulation;
    if ('error' in outcomeOfSimulation) {
      const error = outcomeOfSimulation.error;
      if (error instanceof SimulationError) {
        if (error.reason === 'nonce_already_used') return this.usedElsewhere(request, started);
        return refusal(error.reason, error.message);
      }
      return refusal('chain_unavailable', `the chain RPC did not answer: ${describe(error)}`);
    }
    const gas = outcomeOfSimulation.gas;
    const simulated = performance.now();
    let chainState: { pendingNonce: bigint; fees: FeeCaps };
    try {
      const [pendingNonce, suggested] = await Promise.all([chainNonce, fees]);
      chainState = { pendingNonce, fees: suggested };
    } catch (error) {
      return refusal('chain_unavailable', `the chain RPC did not answer: ${describe(error)}`);
    }
    const row = await this.record(request, data, gas, chainState);
    if (row.status === 'signed') await this.broadcastRecorded(row);
    return this.answerFor(row, request, started, {
      checksMs: checked - started,
      simulationMs: simulated - checked,
    });
  }

  private async find(request: RelayerSubmitRequest): Promise<Row | undefined> {
    return this.ctx.db
      .selectFrom('relayed_authorizations')
      .selectAll()
      .where('chain_id', '=', request.chainId)
      .where('token_address', '=', request.token.toLowerCase())
      .where('payer', '=', request.authorization.from.toLowerCase())
      .where('auth_nonce', '=', request.authorization.nonce.toLowerCase())
      .executeTakeFirst();
  }

  /** The chain's fee suggestion, shared for a moment by a burst of submissions (one read, not one each). */
  private currentFees(): Promise<FeeCaps> {
    if (this.fees && Date.now() - this.fees.at < FEES_CACHE_MS) return this.fees.caps;
    const caps = this.chain.suggestedFees();
    this.fees = { caps, at: Date.now() };
    caps.catch(() => {
      if (this.fees?.caps === caps) this.fees = undefined;
    });
    return caps;
  }

  /**
   * Records the signed transaction of a submission: joins the next batch of the nonce allocator, which signs and
   * commits every waiting submission in one transaction under the relayer's lock (which holds no RPC: the chain's
   * pending nonce and fees are read before it). A concurrent submission of the same authorization finds the row
   * (or its twin in the batch) instead and sends nothing. The caller broadcasts after the commit, outside the
   * lock, so a crash between the two leaves a recorded transaction that the background pass rebroadcasts.
   */
  private record(
    request: RelayerSubmitRequest,
    data: string,
    gas: bigint,
    chainState: { pendingNonce: bigint; fees: FeeCaps },
  ): Promise<Row> {
    return new Promise<Row>((resolve, reject) => {
      this.waiting.push({ request, data, gas, chainState, resolve, reject });
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
    const keyOf = (request: RelayerSubmitRequest) =>
      `${request.authorization.from.toLowerCase()}:${request.authorization.nonce.toLowerCase()}`;
    return this.ctx.inTransaction(async (trx) => {
      await sql`select pg_advisory_xact_lock(${this.lockKey}::bigint)`.execute(trx);
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
      const highest = await trx
        .selectFrom('relayed_authorizations')
        .select((eb) => eb.fn.max('relayer_nonce').as('nonce'))
        .where('chain_id', '=', this.settings.chainId)
        .where('relayer_address', '=', this.chain.address.toLowerCase())
        .executeTakeFirst();
      let nonce = highest?.nonce === null || highest?.nonce === undefined ? 0n : BigInt(highest.nonce) + 1n;
      // Read before the lock: a lower bound still (only this relayer's own transactions, all recorded here,
      // move it), so the larger of the two is the next free nonce.
      for (const { chainState } of batch) nonce = larger(nonce, chainState.pendingNonce);
      const fresh: Array<Parameters<typeof this.authorizationColumns>[0]> = [];
      const values = [];
      for (const { request, data, gas, chainState } of batch) {
        const key = keyOf(request);
        if (recorded.has(key) || fresh.some((r) => keyOf(r) === key)) continue;
        const fees = this.capped(chainState.fees);
        const gasLimit = (gas * 13n) / 10n;
        const signed = await this.chain.sign({ tokenAddress: request.token, data, nonce, gasLimit, fees });
        fresh.push(request);
        values.push({
          ...this.authorizationColumns(request),
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

  private capped(fees: FeeCaps): FeeCaps {
    const cap = this.settings.maxFeePerGasCapWei;
    const maxFeePerGas = smaller(fees.maxFeePerGas, cap);
    const maxPriorityFeePerGas = smaller(fees.maxPriorityFeePerGas, maxFeePerGas);
    return { maxFeePerGas, maxPriorityFeePerGas };
  }

  private async broadcastRecorded(row: Row): Promise<void> {
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
      return;
    }
    await this.ctx.db
      .updateTable('relayed_authorizations')
      .set((eb) => ({
        status: 'broadcast',
        last_error: null,
        last_broadcast_at: new Date(),
        broadcast_attempts: eb('broadcast_attempts', '+', 1),
      }))
      .where('id', '=', row.id)
      .where('status', 'in', ['signed', 'broadcast'])
      .execute();
  }

  /** The columns that identify and restate the authorization itself (the same for every way a row is made). */
  private authorizationColumns(request: RelayerSubmitRequest) {
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
      relayer_address: this.chain.address.toLowerCase(),
    };
  }

  /** Someone else's transaction used this authorization: credited once, from that transaction's Transfer log. */
  private async usedElsewhere(request: RelayerSubmitRequest, started: number): Promise<RelayerSubmitReply> {
    const a = request.authorization;
    const txHash = await this.chain.findAuthorizationUse(
      request.token,
      a.from,
      a.nonce,
      this.settings.lookbackBlocks,
    );
    const executed = txHash ? await this.chain.executed(txHash, a.from, this.settings.escrowAddress) : null;
    if (!executed || executed.reverted) {
      return refusal('nonce_already_used', 'this authorization was already used or canceled on chain');
    }
    const inserted = await this.ctx.db
      .insertInto('relayed_authorizations')
      .values({
        ...this.authorizationColumns(request),
        status: 'used_elsewhere',
        settled_tx_hash: executed.txHash,
        block_number: executed.blockNumber,
        log_index: executed.logIndex,
        finished_at: new Date(),
      })
      .onConflict((oc) => oc.columns(['chain_id', 'token_address', 'payer', 'auth_nonce']).doNothing())
      .returningAll()
      .executeTakeFirst();
    const row = inserted ?? (await this.find(request))!;
    return this.answerFor(row, request, started, NO_TIME);
  }

  /** The reply for a recorded authorization, after waiting (bounded) for its receipt. */
  private async answerFor(
    row: Row,
    request: RelayerSubmitRequest,
    started: number,
    before: { checksMs: number; simulationMs: number },
  ): Promise<RelayerSubmitReply> {
    const { checksMs, simulationMs } = before;
    const a = request.authorization;
    const same =
      row.signature === request.signature.toLowerCase() &&
      row.value_micro === BigInt(a.value) &&
      row.to_address === a.to.toLowerCase();
    if (!same) {
      return refusal(
        'authorization_conflict',
        'a different authorization with this nonce was already submitted',
      );
    }
    const submitted = performance.now();
    const deadline = Date.now() + request.waitForReceiptMs;
    let current = row;
    for (let round = 0; round < 10_000; round++) {
      if (current.status === 'confirmed' || current.status === 'used_elsewhere') {
        const inclusionMs = performance.now() - submitted;
        return {
          ok: true,
          status: 'confirmed',
          txHash: current.settled_tx_hash!,
          blockNumber: Number(current.block_number),
          logIndex: current.log_index!,
          usedElsewhere: current.status === 'used_elsewhere',
          timings: {
            checksMs,
            simulationMs,
            submissionMs: submitted - started - checksMs - simulationMs,
            inclusionMs,
          },
        };
      }
      if (current.status === 'failed') {
        return refusal('transaction_failed', current.last_error ?? 'the submission failed on chain');
      }
      // The caller is answered from the receipt; the row is finished meanwhile (or by the background pass).
      current = (await this.advance(current, { answerFirst: true })) ?? current;
      if (
        current.status === 'confirmed' ||
        current.status === 'used_elsewhere' ||
        current.status === 'failed'
      )
        continue;
      if (Date.now() >= deadline) break;
      await sleep(Math.min(this.settings.receiptPollMs, Math.max(1, deadline - Date.now())));
    }
    return {
      ok: true,
      status: 'submitted',
      txHash: current.tx_hash!,
      usedElsewhere: false,
      timings: {
        checksMs,
        simulationMs,
        submissionMs: submitted - started - checksMs - simulationMs,
        inclusionMs: 0,
      },
    };
  }

  /** One background pass: first what a reorg took off the chain (the lowest nonces), then what is open. */
  async runOnce(): Promise<void> {
    await this.watchConfirmed();
    const open = await this.ctx.db
      .selectFrom('relayed_authorizations')
      .selectAll()
      .where('status', 'in', ['signed', 'broadcast'])
      .where('chain_id', '=', this.settings.chainId)
      .orderBy('relayer_nonce')
      .limit(OPEN_BATCH)
      .execute();
    for (const row of open) {
      if (this.loop.isStopped) return;
      const advanced = await this.advance(row);
      if (
        !advanced ||
        advanced.status === 'confirmed' ||
        advanced.status === 'used_elsewhere' ||
        advanced.status === 'failed'
      )
        continue;
      if (advanced.status === 'signed') await this.broadcastRecorded(advanced);
      else await this.bumpIfStuck(advanced);
    }
  }

  /**
   * Confirmed submissions not yet CONFIRMATIONS deep: one whose receipt is gone (a reorg dropped it) while its
   * relayer nonce is not consumed is broadcast again with the SAME signed bytes, so the same transaction hash
   * (the one x402 booked) is mined again and every later relayer nonce, waiting behind the gap, can be mined.
   * Never re-signed: another hash would be another transfer for the ledger. Bounded: OPEN_BATCH rows a pass.
   */
  private async watchConfirmed(): Promise<void> {
    const watched = await this.ctx.db
      .selectFrom('relayed_authorizations')
      .selectAll()
      .where('status', '=', 'confirmed')
      .where('final_at', 'is', null)
      .where('chain_id', '=', this.settings.chainId)
      .where('relayer_address', '=', this.chain.address.toLowerCase())
      .orderBy('relayer_nonce')
      .limit(OPEN_BATCH)
      .execute();
    if (watched.length === 0) return;
    const head = await this.chain.blockNumber();
    let minedNonce: bigint | undefined;
    for (const row of watched) {
      if (this.loop.isStopped) return;
      const hash = row.settled_tx_hash!;
      const executed = await this.chain.executed(hash, row.payer, row.to_address);
      if (executed) {
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
        continue;
      }
      minedNonce ??= await this.chain.minedNonce();
      if (row.relayer_nonce === null || minedNonce > row.relayer_nonce) {
        // The nonce was consumed, but not by this hash: an earlier or later version of the same nonce, or
        // nothing of ours. A null receipt can also be a lying or lagging node; look again next pass.
        this.ctx.logger.warn(
          { id: row.id, txHash: hash, relayerNonce: row.relayer_nonce?.toString() },
          'confirmed relayed authorization has no receipt but its relayer nonce is used; watching',
        );
        continue;
      }
      if (hash !== row.tx_hash || !row.raw_tx) {
        // The mined version was an earlier fee bump whose bytes are not kept: the latest version (same nonce,
        // same authorization) is sent instead; x402 booked the other hash, so the ledger's chain check decides.
        this.ctx.logger.error(
          { id: row.id, txHash: hash, latestTxHash: row.tx_hash },
          'a reorg dropped a relayed authorization mined under an earlier fee bump; sending its latest version',
        );
      }
      this.ctx.logger.warn(
        { id: row.id, txHash: hash, relayerNonce: row.relayer_nonce.toString() },
        'relayed authorization dropped by a reorg; broadcasting the recorded transaction again',
      );
      try {
        await this.chain.broadcast(row.raw_tx!, row.tx_hash!);
      } catch (error) {
        this.ctx.logger.warn(
          { id: row.id, txHash: row.tx_hash, reason: describe(error) },
          'rebroadcast after a reorg failed; will retry',
        );
        continue;
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
  }

  /**
   * Looks for a receipt of any hash this row was signed as; finishes the row when one exists. With
   * `answerFirst`, a successful transfer is returned as confirmed at once while the row is finished in the
   * background (idempotent; the background pass finishes it if this fails).
   */
  private async advance(row: Row, options: { answerFirst?: boolean } = {}): Promise<Row | undefined> {
    if (row.status !== 'signed' && row.status !== 'broadcast') return row;
    for (const hash of [row.tx_hash!, ...row.earlier_tx_hashes]) {
      const executed = await this.chain.executed(hash, row.payer, row.to_address);
      if (!executed) continue;
      if (!executed.reverted) {
        const fields = {
          settled_tx_hash: executed.txHash,
          block_number: executed.blockNumber,
          log_index: executed.logIndex,
        };
        if (!options.answerFirst) return this.finish(row, 'confirmed', fields);
        const finishing = this.finish(row, 'confirmed', fields)
          .catch((error) =>
            this.ctx.logger.warn(
              { id: row.id, txHash: executed.txHash, reason: describe(error) },
              'relayed authorization not finished yet; the background pass will',
            ),
          )
          .finally(() => this.finishing.delete(finishing));
        this.finishing.add(finishing);
        return { ...row, status: 'confirmed', ...fields, finished_at: new Date() };
      }
      // Our transaction reverted: the authorization expired, or someone else used it first.
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
      return this.finish(row, 'failed', { last_error: `transaction ${hash} reverted on chain` });
    }
    return row;
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

  /** A broadcast stuck past feeBumpAfterMs is re-signed on the same relayer nonce with higher fees (bounded). */
  private async bumpIfStuck(row: Row): Promise<void> {
    const sentAt = row.last_broadcast_at?.getTime() ?? 0;
    if (Date.now() - sentAt < this.settings.feeBumpAfterMs) return;
    if (row.relayer_nonce !== null && (await this.chain.minedNonce()) < row.relayer_nonce) {
      // An earlier relayer nonce is not mined (it waits, or a reorg dropped it and watchConfirmed sends it
      // again): higher fees cannot move this one past the gap, so it is only kept in the node's pool.
      await this.broadcastRecorded(row);
      return;
    }
    if (row.fee_bumps >= this.settings.maxFeeBumps) {
      await this.broadcastRecorded(row); // keep the last version alive
      return;
    }
    const suggested = await this.chain.suggestedFees();
    const previous = {
      maxFeePerGas: BigInt(row.max_fee_per_gas ?? '0'),
      maxPriorityFeePerGas: BigInt(row.max_priority_fee_per_gas ?? '0'),
    };
    // Nodes replace a pending transaction only for at least +10% on both caps; +25% leaves room.
    const bumped = this.capped({
      maxFeePerGas: larger((previous.maxFeePerGas * 125n) / 100n + 1n, suggested.maxFeePerGas),
      maxPriorityFeePerGas: larger(
        (previous.maxPriorityFeePerGas * 125n) / 100n + 1n,
        suggested.maxPriorityFeePerGas,
      ),
    });
    if (bumped.maxFeePerGas <= previous.maxFeePerGas) {
      await this.broadcastRecorded(row); // at the cap: rebroadcast what we have
      return;
    }
    const signed = await this.chain.sign({
      tokenAddress: row.token_address,
      data: this.chain.callData(
        {
          from: row.payer,
          to: row.to_address,
          value: row.value_micro.toString(),
          validAfter: row.valid_after.toString(),
          validBefore: row.valid_before.toString(),
          nonce: row.auth_nonce,
        },
        row.signature,
      ),
      nonce: row.relayer_nonce!,
      gasLimit: row.gas_limit!,
      fees: bumped,
    });
    const updated = await this.ctx.db
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
    if (!updated) return;
    this.ctx.logger.warn(
      { id: row.id, previousTxHash: row.tx_hash, txHash: updated.tx_hash, bumps: updated.fee_bumps },
      'relayed authorization stuck; fees bumped on the same relayer nonce',
    );
    await this.broadcastRecorded(updated);
  }
}
