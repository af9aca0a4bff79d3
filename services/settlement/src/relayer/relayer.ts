import { type RpcServer, serveRpcs } from '@paygate/bus';
import type { RelayerStatusReply, RelayerSubmitReply, RelayerSubmitRequest } from '@paygate/contracts';
import { type BackgroundTask, Gauge, PollingLoop, type ServiceContext } from '@paygate/runtime';
import type { SettlementDB } from '../db';
import { RelayerBackgroundPass } from './background-pass';
import { dependsOnCode, type FeeCaps, type RelayerChain, SimulationError } from './chain';
import { HeadPush } from './head-push';
import { HeadWatcher } from './heads';
import type { ChainState } from './nonce-allocator';
import { type Assignment, RelayerSigner, SignerPool } from './pool';
import { RecordedAuthorizations } from './recorded';
import { RefusedPayers } from './refused-payers';
import {
  cappedFees,
  describe,
  isFinished,
  type Refusal,
  type RelayerSettings,
  type Row,
  refusal,
} from './settings';

export type { RelayerSettings } from './settings';

const FEES_CACHE_MS = 1000;
/** How often a caller waiting for its receipt reads its row again (one indexed read each, at most). */
const ROW_REREAD_MS = 1000;

/** Time spent before the submission: the checks and the simulation (none for a submission already recorded). */
interface TimeBefore {
  checksMs: number;
  simulationMs: number;
}

const NO_TIME: TimeBefore = { checksMs: 0, simulationMs: 0 };

/**
 * Submits x402 payments' EIP-3009 authorizations with a pool of gas-only keys, exactly once per authorization:
 * one row per (chain, token, payer, nonce), the signed transaction recorded (with the key that signed it) before it
 * is broadcast, one nonce allocator per key (advisory lock across replicas; ./nonce-allocator), each submission on
 * the least loaded key that can pay and is not stuck (./pool), fee bumps that keep every earlier hash, and a
 * background pass that rebroadcasts, bumps and finishes whatever is recorded (which is also the crash recovery;
 * ./background-pass). This file holds the RPC handlers and the submission itself.
 */
export class Relayer implements BackgroundTask {
  private readonly loop: PollingLoop;
  private readonly recorded: RecordedAuthorizations;
  /** Payers (and contract code) refused after a relayed transaction of theirs reverted on chain. */
  private readonly refusedPayers: RefusedPayers;
  private readonly pool: SignerPool;
  private readonly pass: RelayerBackgroundPass;
  /** Wakes the callers waiting for a receipt when a newer block exists (./heads). */
  private readonly heads: HeadWatcher;
  private readonly headPush: HeadPush | undefined;
  private server: RpcServer | undefined;
  private stopping = false;
  private fees: { caps: Promise<FeeCaps>; at: number } | undefined;
  /** The watch on the background pass's marks (./pool markOpen) runs (one at a time). */
  private watchingMarks = false;
  /** Wakes that watch when a key's mark comes of age or the relayer stops. */
  private markTimer: { timer: NodeJS.Timeout; wake(): void } | undefined;

  /** Reads and broadcasts (any key's provider: they share one); signing is each key's (./pool). */
  private readonly chain: RelayerChain;

  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    /** The pool's keys, the first also reading for all (a single key is a pool of one). */
    chains: RelayerChain | readonly RelayerChain[],
    private readonly settings: RelayerSettings,
  ) {
    const keys = Array.isArray(chains) ? chains : [chains as RelayerChain];
    const chain = keys[0]!;
    this.chain = chain;
    this.refusedPayers = new RefusedPayers(ctx, chain, settings);
    this.recorded = new RecordedAuthorizations(ctx, chain, settings, this.refusedPayers);
    this.pool = new SignerPool(
      keys.map((key) => new RelayerSigner(ctx, key, settings, this.recorded)),
      settings,
      ctx.logger,
    );
    this.pass = new RelayerBackgroundPass(
      ctx,
      chain,
      this.pool,
      settings,
      this.recorded,
      () => this.loop.isStopped,
    );
    this.heads = new HeadWatcher(chain, settings.receiptPollMs);
    this.headPush = settings.headsWsUrl
      ? new HeadPush(settings.headsWsUrl, settings.chainId, (head) => this.heads.pushed(head), ctx.logger)
      : undefined;
    this.registerKeyGauges();
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
    this.headPush?.start();
    this.loop.start();
  }

  async stop(): Promise<void> {
    // Callers still waiting for a receipt are answered `submitted` (their transaction is recorded) at once.
    this.stopping = true;
    this.markTimer?.wake();
    this.heads.stop();
    await this.headPush?.stop();
    await this.server?.stop();
    await this.loop.stop();
    await this.recorded.finished();
  }

  /** One background pass (./background-pass), then the watch on the marks it left on the keys. */
  async runOnce(): Promise<void> {
    await this.pass.runOnce();
    void this.watchMarks();
  }

  /**
   * A key marked by the background pass (its open rows) is seen again at each new head while the mark says stuck:
   * once the chain has mined every row the pass saw (its `latest` nonce past the highest), the mark is cleared at
   * once, not at the next pass, so the key takes new submissions the moment its queue has moved. One nonce read per
   * stuck key per block, and none while no key is stuck.
   */
  private async watchMarks(): Promise<void> {
    if (this.watchingMarks) return;
    this.watchingMarks = true;
    try {
      while (!this.stopping) {
        const marked = this.pool.signers.filter((signer) => signer.openThroughNonce !== undefined);
        if (marked.length === 0) return;
        const now = Date.now();
        const stuck = marked.filter((signer) => signer.markedStuck(now));
        if (stuck.length === 0) {
          // Nothing stuck yet: until the oldest mark comes of age (a row mined meanwhile clears it first).
          const dueIn = Math.min(
            ...marked.map((signer) => signer.stuckSince! + this.settings.stuckAfterMs - now),
          );
          await this.markDelay(Math.max(1, dueIn));
          continue;
        }
        const head = this.heads.known();
        await Promise.all(
          stuck.map(async (signer) => {
            const mined = await signer.chain.minedNonce().catch(() => undefined);
            if (mined !== undefined && signer.minedBelow(mined, Date.now())) {
              this.ctx.logger.warn(
                { relayer: signer.address, minedNonce: mined.toString() },
                'relayer key no longer stuck: its transactions were mined',
              );
            }
          }),
        );
        if (stuck.some((signer) => signer.openThroughNonce !== undefined)) {
          await this.heads.newerThan(head, ROW_REREAD_MS);
        }
      }
    } finally {
      this.watchingMarks = false;
    }
  }

  private markDelay(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        if (this.markTimer?.timer === timer) this.markTimer = undefined;
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.markTimer = { timer, wake };
    });
  }

  /** A receipt of a key's nonce n: that key's nonces up to n are mined (its pass mark cleared if that covers it). */
  private mined(row: Row): void {
    if (row.status !== 'confirmed' || row.relayer_nonce === null) return;
    const signer = this.pool.byAddress(row.relayer_address);
    if (signer?.minedBelow(row.relayer_nonce + 1n, Date.now())) {
      this.ctx.logger.warn(
        { relayer: signer.address, relayerNonce: row.relayer_nonce.toString() },
        'relayer key no longer stuck: its transactions were mined',
      );
    }
  }

  /** The pool's keys (checksummed addresses), in the configured order. */
  get addresses(): string[] {
    return this.pool.signers.map((signer) => signer.chain.address);
  }

  /** Per key of the pool: stuck (1/0) and the submissions waiting for an answer, read at each scrape. */
  private registerKeyGauges(): void {
    const keys = () => this.keys();
    const registers = [this.ctx.metrics.registry];
    new Gauge({
      name: 'settlement_relayer_key_stuck',
      help: 'Per relayer key: 1 while a transaction of it waits past RELAYER_STUCK_AFTER_MS for its receipt (new submissions skip it)',
      labelNames: ['address'],
      registers,
      collect() {
        for (const key of keys()) this.set({ address: key.address }, key.stuck ? 1 : 0);
      },
    });
    new Gauge({
      name: 'settlement_relayer_key_submissions',
      help: 'Per relayer key: submissions of this replica assigned to it and not answered yet',
      labelNames: ['address'],
      registers,
      collect() {
        for (const key of keys()) this.set({ address: key.address }, key.load);
      },
    });
  }

  /** Each key of the pool as this process sees it: its submissions waiting for an answer, and whether it is stuck. */
  keys(): Array<{ address: string; load: number; stuck: boolean }> {
    const now = Date.now();
    return this.pool.signers.map((signer) => ({
      address: signer.address,
      load: signer.load(),
      stuck: signer.stuck(now),
    }));
  }

  /**
   * Available while any key can pay gas; `address` and `balanceWei` are the best funded key's, `signers` every
   * key's (one below RELAYER_MIN_BALANCE_WEI is skipped by new submissions, the others go on).
   */
  async status(): Promise<RelayerStatusReply> {
    const balances = await this.pool.balances();
    const signers = balances.map(({ signer, wei }) => ({
      address: signer.chain.address,
      available: wei !== undefined && wei >= this.settings.minBalanceWei,
      balanceWei: (wei ?? 0n).toString(),
    }));
    const best = balances.reduce((a, b) => ((b.wei ?? -1n) > (a.wei ?? -1n) ? b : a));
    const available = signers.some((signer) => signer.available);
    const reason = available
      ? null
      : best.wei === undefined
        ? (best.error ?? 'the chain RPC did not answer')
        : `every relayer key's balance is below ${this.settings.minBalanceWei} wei (the largest: ${best.wei} wei)`;
    return {
      available,
      address: best.signer.chain.address,
      balanceWei: (best.wei ?? 0n).toString(),
      reason,
      signers,
    };
  }

  /**
   * Submits (once) and waits up to waitForReceiptMs for the receipt. `ownKey`: the payer's key is Paygate's own (a
   * deposit address's sweep), never refused for a revert.
   */
  async submit(
    request: RelayerSubmitRequest,
    options: { ownKey?: boolean } = {},
  ): Promise<RelayerSubmitReply> {
    const started = performance.now();
    const foreign = this.refusalOfForeign(request);
    if (foreign) return foreign;
    // The lookup, the key's assignment, the payer's code, the simulation and what the nonce allocation needs from
    // the chain (the key's pending nonce, fees) run side by side: none of them spends anything, and the nonce lock
    // then holds no RPC, so a burst is signed back to back and enters the pool together (one block, not two). The
    // simulation waits for the fees and the key: it runs from the key that signs, with the fees it signs with, as
    // the block will run it.
    const found = this.recorded.find(request);
    const assigned = this.pool.assign();
    const codeHash = this.chain.codeHash(request.authorization.from);
    const key = assigned.then((a) => ('ok' in a ? undefined : a));
    const chainNonce = key.then((a) => a?.signer.chain.pendingNonce());
    const fees = this.currentFees();
    codeHash.catch(() => undefined);
    chainNonce.catch(() => undefined);
    fees.catch(() => undefined);
    const simulation = key.then((a) => (a ? this.simulation(request, a.signer, codeHash, fees) : undefined));
    let assignment: Assignment | undefined;
    try {
      const existing = await found;
      if (existing) return this.answerFor(existing, request, started, NO_TIME);
      const outcome = await assigned;
      if ('ok' in outcome) {
        // Out of gas (or no balance readable): after the payer's refusal, which says more to its caller.
        const refused = await this.refusalOfPayer(request, codeHash, options);
        return refused ?? outcome;
      }
      assignment = outcome;
      return await this.submitAssigned(
        request,
        assignment,
        started,
        { codeHash, chainNonce, fees, simulation },
        options,
      );
    } finally {
      // A key assigned and not used (the authorization was recorded already, or a read failed) is freed too.
      if (assignment) assignment.release();
      else void key.then((a) => a?.release());
    }
  }

  /** The refusal of a payer (or its code) in force, or a chain_unavailable refusal when its code cannot be read. */
  private async refusalOfPayer(
    request: RelayerSubmitRequest,
    codeHash: Promise<string | null>,
    options: { ownKey?: boolean },
  ): Promise<Refusal | undefined> {
    let payerCodeHash: string | null;
    try {
      payerCodeHash = await codeHash;
    } catch (error) {
      return refusal('chain_unavailable', `the chain RPC did not answer: ${describe(error)}`);
    }
    if (options.ownKey) return undefined;
    return this.refusedPayers.refusalOf(request.authorization.from, payerCodeHash);
  }

  /** A new submission on its key: the payer's checks, the simulation, the recorded transaction, its broadcast. */
  private async submitAssigned(
    request: RelayerSubmitRequest,
    assignment: Assignment,
    started: number,
    reads: {
      codeHash: Promise<string | null>;
      chainNonce: Promise<bigint | undefined>;
      fees: Promise<FeeCaps>;
      simulation: Promise<{ gas: bigint; data: string } | { error: unknown } | undefined>;
    },
    options: { ownKey?: boolean },
  ): Promise<RelayerSubmitReply> {
    const { codeHash, chainNonce, fees } = reads;
    const simulation = reads.simulation as Promise<{ gas: bigint; data: string } | { error: unknown }>;

    let payerCodeHash: string | null;
    try {
      payerCodeHash = await codeHash;
    } catch (error) {
      return refusal('chain_unavailable', `the chain RPC did not answer: ${describe(error)}`);
    }
    if (!options.ownKey) {
      const refused = await this.refusedPayers.refusalOf(request.authorization.from, payerCodeHash);
      if (refused) return refused;
    }
    const checked = performance.now();
    const outcomeOfSimulation = await simulation;
    if ('error' in outcomeOfSimulation) {
      return this.refusalOfSimulation(outcomeOfSimulation.error, request, started);
    }
    const { gas, data } = outcomeOfSimulation;
    const simulated = performance.now();
    let chainState: ChainState;
    try {
      const [pendingNonce, suggested] = await Promise.all([chainNonce, fees]);
      chainState = { pendingNonce: pendingNonce!, fees: suggested };
    } catch (error) {
      return refusal('chain_unavailable', `the chain RPC did not answer: ${describe(error)}`);
    }
    const row = await assignment.signer.allocator.record(request, data, gas, chainState, payerCodeHash);
    // Recorded on this key from now (or found recorded, maybe on another key): waiting on the chain from here.
    assignment.recordedAt = Date.now();
    if (row.status === 'signed') await this.recorded.broadcastForCaller(row);
    return this.answerFor(row, request, started, {
      checksMs: checked - started,
      simulationMs: simulated - checked,
    });
  }

  /**
   * The submission's calldata and its simulation from the relayer's address with the fees it will be signed with
   * (capped as signed). The payer's code is waited for only when the calldata depends on it; a signature the
   * token cannot take is an `invalid_signature` refusal, never a throw.
   */
  private async simulation(
    request: RelayerSubmitRequest,
    signer: RelayerSigner,
    codeHash: Promise<string | null>,
    fees: Promise<FeeCaps>,
  ): Promise<{ gas: bigint; data: string } | { error: unknown }> {
    try {
      const payerHasCode = dependsOnCode(request.signature) ? (await codeHash) !== null : false;
      const data = this.chain.callData(request.authorization, request.signature, payerHasCode);
      if (!data) {
        return {
          error: new SimulationError(
            'invalid_signature',
            payerHasCode
              ? 'the signature is not whole bytes'
              : 'the payer has no code, so its signature must be 65 bytes (r, s, v) with v 27 or 28 (or 0 or 1)',
          ),
        };
      }
      const caps = cappedFees(await fees, this.settings.maxFeePerGasCapWei);
      return { gas: await signer.chain.simulate(request.token, data, caps), data };
    } catch (error) {
      return { error };
    }
  }

  /** This relayer submits USDC payments into the escrow wallet on its own chain, nothing else. */
  private refusalOfForeign(request: RelayerSubmitRequest): Refusal | undefined {
    if (request.chainId !== this.settings.chainId) {
      return refusal('invalid_request', `this relayer submits on chain ${this.settings.chainId}`);
    }
    if (request.token.toLowerCase() !== this.settings.usdcAddress.toLowerCase()) {
      return refusal('invalid_request', `this relayer submits USDC at ${this.settings.usdcAddress} only`);
    }
    if (request.authorization.to.toLowerCase() !== this.settings.escrowAddress.toLowerCase()) {
      return refusal('invalid_request', 'this relayer submits payments into the escrow wallet only');
    }
    return undefined;
  }

  /** A failed simulation: refused, unless the authorization was used by someone else (then credited once). */
  private async refusalOfSimulation(
    error: unknown,
    request: RelayerSubmitRequest,
    started: number,
  ): Promise<RelayerSubmitReply> {
    if (error instanceof SimulationError) {
      if (error.reason === 'nonce_already_used') return this.usedElsewhere(request, started);
      return refusal(error.reason, error.message);
    }
    return refusal('chain_unavailable', `the chain RPC did not answer: ${describe(error)}`);
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
        ...this.recorded.authorizationColumns(request, this.chain.address),
        status: 'used_elsewhere',
        settled_tx_hash: executed.txHash,
        block_number: executed.blockNumber,
        log_index: executed.logIndex,
        finished_at: new Date(),
      })
      .onConflict((oc) => oc.columns(['chain_id', 'token_address', 'payer', 'auth_nonce']).doNothing())
      .returningAll()
      .executeTakeFirst();
    const row = inserted ?? (await this.recorded.find(request))!;
    return this.answerFor(row, request, started, NO_TIME);
  }

  /** The reply for a recorded authorization, after waiting (bounded) for its receipt. */
  private async answerFor(
    row: Row,
    request: RelayerSubmitRequest,
    started: number,
    before: TimeBefore,
  ): Promise<RelayerSubmitReply> {
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
    const timings = (inclusionMs: number) => ({
      ...before,
      submissionMs: submitted - started - before.checksMs - before.simulationMs,
      inclusionMs,
    });
    const deadline = Date.now() + request.waitForReceiptMs;
    let current = row;
    /** The head at this caller's previous receipt lookup. */
    let lookedAt: bigint | undefined;
    let readAt = Date.now();
    for (let round = 0; round < 10_000; round++) {
      if (current.status === 'confirmed' || current.status === 'used_elsewhere') {
        this.mined(current);
        return {
          ok: true,
          status: 'confirmed',
          txHash: current.settled_tx_hash!,
          blockNumber: Number(current.block_number),
          logIndex: current.log_index!,
          usedElsewhere: current.status === 'used_elsewhere',
          timings: timings(performance.now() - submitted),
        };
      }
      if (current.status === 'failed') {
        return refusal('transaction_failed', current.last_error ?? 'the submission failed on chain');
      }
      // The head before the receipt lookup: a block that comes after it wakes this caller for another lookup.
      const head = this.heads.known();
      // The caller is answered from the receipt; the row is finished meanwhile (or by the background pass). Woken
      // by a new head, it looks in that block's receipts first (one read for every caller woken by it), and only
      // there when it looked right before that block (one more receipt read each when heads were skipped).
      current =
        (await this.recorded.advance(current, {
          answerFirst: true,
          inBlock: round > 0 && head !== lookedAt ? head : undefined,
          onlyNewBlock: head !== undefined && lookedAt !== undefined && head === lookedAt + 1n,
        })) ?? current;
      lookedAt = head;
      if (isFinished(current)) continue;
      if (Date.now() >= deadline || this.stopping) break;
      if (Date.now() - readAt >= ROW_REREAD_MS) {
        // The background pass may have re-signed it (a fee bump: a hash this copy does not know) or finished it.
        current = (await this.recorded.byId(current.id)) ?? current;
        readAt = Date.now();
        if (isFinished(current)) continue;
      }
      // Woken by the next head, or to read the row again when none comes (a chain that mines only on demand).
      await this.heads.newerThan(head, Math.min(deadline - Date.now(), ROW_REREAD_MS));
    }
    return {
      ok: true,
      status: 'submitted',
      txHash: current.tx_hash!,
      usedElsewhere: false,
      timings: timings(0),
    };
  }
}
