import { type RpcServer, serveRpcs } from '@paygate/bus';
import { sameAddress } from '@paygate/chain';
import type { RelayerStatusReply, RelayerSubmitReply, RelayerSubmitRequest } from '@paygate/contracts';
import { type BackgroundTask, Gauge, PollingLoop, type ServiceContext } from '@paygate/runtime';
import type { SettlementDB } from '../db';
import { RelayerBackgroundPass } from './background-pass';
import { dependsOnCode, type FeeCaps, type RelayerChain, SimulationError, settledBy } from './chain';
import { HeadPush } from './head-push';
import { HeadWatcher } from './heads';
import type { ChainState } from './nonce-allocator';
import { type Assignment, RelayerSigner, SignerPool } from './pool';
import { RecordedAuthorizations } from './recorded';
import { RefusedPayers } from './refused-payers';
import {
  cappedFees,
  chainUnavailable,
  isFinished,
  type Refusal,
  type RelayerSettings,
  type Row,
  refusal,
} from './settings';

const FEES_CACHE_MS = 1000;
/** How often a caller waiting for its receipt reads its row again. */
const ROW_REREAD_MS = 1000;

const NO_TIME = { checksMs: 0, simulationMs: 0 };
type TimeBefore = typeof NO_TIME;
type Accepted = Extract<RelayerSubmitReply, { ok: true }>;

/** Submits x402 EIP-3009 authorizations once each with a pool of gas-only keys: the RPC handlers, the submission. */
export class Relayer implements BackgroundTask {
  private readonly loop: PollingLoop;
  private readonly recorded: RecordedAuthorizations;
  private readonly refusedPayers: RefusedPayers;
  private readonly pool: SignerPool;
  private readonly pass: RelayerBackgroundPass;
  private readonly heads: HeadWatcher;
  private readonly headPush: HeadPush | undefined;
  private server: RpcServer | undefined;
  private stopping = false;
  private fees: { caps: Promise<FeeCaps>; at: number } | undefined;
  private watchingMarks = false;
  /** Wakes the marks' watch before its mark comes of age: the relayer stops. */
  private wakeMarks: (() => void) | undefined;
  private readonly chain: RelayerChain;

  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    keys: readonly RelayerChain[],
    private readonly settings: RelayerSettings,
  ) {
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
      intervalMs: settings.transferPollIntervalMs,
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
    this.wakeMarks?.();
    this.heads.stop();
    await this.headPush?.stop();
    await this.server?.stop();
    await this.loop.stop();
    await this.recorded.finished();
  }

  async runOnce(): Promise<void> {
    await this.pass.runOnce();
    void this.watchMarks();
  }

  /** A stuck key's mark is cleared at the first head that mines every row the pass saw, not at the next pass. */
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
          const dueIn = Math.min(
            ...marked.map((signer) => signer.stuckSince! + this.settings.stuckAfterMs - now),
          );
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, Math.max(1, dueIn));
            this.wakeMarks = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          continue;
        }
        const head = this.heads.known();
        await Promise.all(
          stuck.map(async (signer) => {
            const mined = await signer.chain.minedNonce().catch(() => undefined);
            if (mined !== undefined) this.minedBelow(signer, mined);
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

  private minedBelow(signer: RelayerSigner, minedNonce: bigint): void {
    if (signer.minedBelow(minedNonce, Date.now())) {
      this.ctx.logger.warn(
        { relayer: signer.address, minedNonce: minedNonce.toString() },
        'relayer key no longer stuck: its transactions were mined',
      );
    }
  }

  private registerKeyGauges(): void {
    const registers = [this.ctx.metrics.registry];
    const keys = () => this.keys();
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

  /** Each key as this process sees it: its submissions waiting for an answer, and whether it is stuck. */
  keys(): Array<{ address: string; load: number; stuck: boolean }> {
    const now = Date.now();
    return this.pool.signers.map((signer) => ({
      address: signer.address,
      load: signer.load(),
      stuck: signer.stuck(now),
    }));
  }

  /** Available while any key can pay gas; `address` and `balanceWei` are the best funded key's. */
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

  /** Submits (once) and waits up to waitForReceiptMs for the receipt. `ownKey`: a deposit sweep, never refused. */
  async submit(
    request: RelayerSubmitRequest,
    options: { ownKey?: boolean } = {},
  ): Promise<RelayerSubmitReply> {
    const started = performance.now();
    const foreign = this.refusalOfForeign(request);
    if (foreign) return foreign;
    // Every read runs side by side (none spends anything), so the nonce lock holds no RPC and a burst is signed
    // back to back into one block. The simulation runs from the signing key with the fees it signs with.
    const found = this.recorded.find(request);
    const assigned = this.pool.assign();
    const codeHash = this.chain.codeHash(request.authorization.from);
    const key = assigned.then((a) => ('ok' in a ? undefined : a));
    const chainNonce = key.then((a) => a?.signer.chain.pendingNonce());
    const fees = this.currentFees();
    for (const read of [codeHash, chainNonce, fees]) read.catch(() => undefined);
    const simulation = key.then((a) => (a ? this.simulation(request, a.signer, codeHash, fees) : undefined));
    let assignment: Assignment | undefined;
    try {
      const existing = await found;
      if (existing) return this.answerFor(existing, request, started, NO_TIME);
      const outcome = await assigned;
      // The payer's refusal says more to its caller than out of gas.
      const refused = await this.refusalOfPayer(request, codeHash, options);
      if (refused || 'ok' in outcome) return refused ?? (outcome as Refusal);
      assignment = outcome;
      const payerCodeHash = await codeHash;
      const checked = performance.now();
      const simulated = (await simulation)!;
      if ('error' in simulated) {
        const { error } = simulated;
        if (!(error instanceof SimulationError)) return chainUnavailable(error);
        if (error.reason === 'nonce_already_used') return this.usedElsewhere(request, started);
        return refusal(error.reason, error.message);
      }
      const simulationMs = performance.now() - checked;
      let chainState: ChainState;
      try {
        const [pendingNonce, suggested] = await Promise.all([chainNonce, fees]);
        chainState = { pendingNonce: pendingNonce!, fees: suggested };
      } catch (error) {
        return chainUnavailable(error);
      }
      const { gas, data } = simulated;
      const row = await assignment.signer.allocator.record({ request, data, gas, chainState, payerCodeHash });
      assignment.recordedAt = Date.now();
      if (row.status === 'signed') await this.recorded.broadcastForCaller(row);
      return this.answerFor(row, request, started, { checksMs: checked - started, simulationMs });
    } finally {
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
      return chainUnavailable(error);
    }
    if (options.ownKey) return undefined;
    return this.refusedPayers.refusalOf(request.authorization.from, payerCodeHash);
  }

  /** The calldata and its simulation; a signature the token cannot take is `invalid_signature`, never a throw. */
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
  private refusalOfForeign({ chainId, token, authorization }: RelayerSubmitRequest): Refusal | undefined {
    const { settings } = this;
    const foreign =
      chainId !== settings.chainId
        ? `this relayer submits on chain ${settings.chainId}`
        : !sameAddress(token, settings.usdcAddress)
          ? `this relayer submits USDC at ${settings.usdcAddress} only`
          : !sameAddress(authorization.to, settings.escrowAddress)
            ? 'this relayer submits payments into the escrow wallet only'
            : undefined;
    return foreign === undefined ? undefined : refusal('invalid_request', foreign);
  }

  /** The chain's fee suggestion, shared for a moment by a burst of submissions. */
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
    const { from: payer, nonce } = request.authorization;
    const executed = await this.chain.authorizationUse(
      { tokenAddress: request.token, payer, nonce, to: this.settings.escrowAddress },
      this.settings.lookbackBlocks,
    );
    if (!executed) {
      return refusal('nonce_already_used', 'this authorization was already used or canceled on chain');
    }
    const inserted = await this.ctx.db
      .insertInto('relayed_authorizations')
      .values({
        ...this.recorded.authorizationColumns(request, this.chain.address),
        status: 'used_elsewhere',
        ...settledBy(executed),
        finished_at: new Date(),
      })
      .onConflict((oc) => oc.columns(['chain_id', 'token_address', 'payer', 'auth_nonce']).doNothing())
      .returningAll()
      .executeTakeFirst();
    const row = inserted ?? (await this.recorded.find(request))!;
    return this.answerFor(row, request, started, NO_TIME);
  }

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
    let lookedAt: bigint | undefined;
    let readAt = Date.now();
    for (let round = 0; round < 10_000; round++) {
      if (current.status === 'confirmed' || current.status === 'used_elsewhere') {
        return this.confirmedReply(current, timings(performance.now() - submitted));
      }
      if (current.status === 'failed') {
        return refusal('transaction_failed', current.last_error ?? 'the submission failed on chain');
      }
      // Woken by a new head, the caller looks in that block's receipts first (one read for every caller), and only
      // there when it looked right before that block.
      const head = this.heads.known();
      current = await this.recorded.advance(current, {
        answerFirst: true,
        inBlock: round > 0 && head !== lookedAt ? head : undefined,
        onlyNewBlock: head !== undefined && lookedAt !== undefined && head === lookedAt + 1n,
      });
      lookedAt = head;
      if (isFinished(current)) continue;
      if (Date.now() >= deadline || this.stopping) break;
      if (Date.now() - readAt >= ROW_REREAD_MS) {
        // The background pass may have fee-bumped it (a new hash) or finished it.
        current = (await this.recorded.byId(current.id)) ?? current;
        readAt = Date.now();
        if (isFinished(current)) continue;
      }
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

  /** A confirmed row's answer; its key's stuck mark is cleared up to its nonce. */
  private confirmedReply(row: Row, timings: Accepted['timings']): Accepted {
    const signer = this.pool.byAddress(row.relayer_address);
    if (row.status === 'confirmed' && signer) this.minedBelow(signer, row.relayer_nonce! + 1n);
    return {
      ok: true,
      status: 'confirmed',
      txHash: row.settled_tx_hash!,
      blockNumber: Number(row.block_number),
      logIndex: row.log_index!,
      usedElsewhere: row.status === 'used_elsewhere',
      timings,
    };
  }
}
