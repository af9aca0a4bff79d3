import { randomBytes } from 'node:crypto';
import { type RpcServer, serveRpcs } from '@paygate/bus';
import {
  formatAddress,
  makeProvider,
  TRANSFER_WITH_AUTHORIZATION_TYPES,
  usdcAbi,
  usdcEip712Domain,
} from '@paygate/chain';
import type { DepositHoldingsReply, RelayerSubmitReply, TransferAuthorization } from '@paygate/contracts';
import { Counter, PollingLoop, type ServiceContext } from '@paygate/runtime';
import { Contract, getAddress, type JsonRpcProvider } from 'ethers';
import { type Selectable, sql } from 'kysely';
import type { SettlementDB } from '../db';
import type { Relayer } from '../relayer/relayer';
import type { DepositSweepConfig } from './config';
import type { DepositSweepsTable } from './tables';

type Sweep = Selectable<DepositSweepsTable>;
export type DepositPassResult = {
  finished: number;
  swept: number;
  dust: number;
  empty: number;
  failed: number;
};

/** One sweeper pass at a time across replicas (a transaction-scoped advisory lock held for the pass). The lock is named with the schema: two deployments (or two test suites) sharing
 * a database each have their own sweeper. */
const SWEEP_LOCK_KEY = 'settlement-deposit-sweep';
/** A refused or failed sweep's address is read again after this long. */
const RETRY_AFTER_MS = 60_000;

export interface DepositChain {
  rpcUrl: string;
  chainId: number;
  usdcAddress: string;
  usdcEip712Name: string;
  rpcTimeoutMs: number;
}

/**
 * Moves what session deposit addresses received into the escrow wallet, without the buyer or the address paying
 * gas: settlement derives the address's key (the only place it exists), signs an EIP-3009
 * `transferWithAuthorization` of the address's whole balance to escrow, and its relayer submits it.
 *
 * Exactly once: the authorization (its random nonce, value and signature) is recorded before it is submitted, at
 * most one open per address, and it is only ever re-submitted as recorded; the token executes a nonce at most
 * once and the relayer records one transaction per (payer, nonce). So a crash between signing and mining finds
 * the same authorization and submits it again (the relayer answers with its recorded transaction). A sweep
 * only ever moves money into escrow and never more than the address holds.
 *
 * Nothing is booked: the ledger credited escrow_asset when the transfer reached the deposit address
 * (`transfer.observed`); reconciliation adds the balances of the addresses that may still hold money
 * (`settlement.deposit_holdings`), and the indexer does not report a sweep (a move between Paygate's addresses).
 *
 * Dust: a balance below CHECKOUT_SWEEP_MIN_MICRO stays (gas would cost a noticeable share of it) until another
 * transfer arrives; the address stays `holding` so reconciliation still counts it. Each pass reads at most
 * CHECKOUT_SWEEP_BATCH addresses.
 */
export class DepositSweeper {
  private readonly loop: PollingLoop;
  private readonly provider: JsonRpcProvider;
  private readonly usdc: Contract;
  private readonly outcomes: Counter<'outcome'>;
  private server: RpcServer | undefined;

  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    private readonly config: DepositSweepConfig,
    private readonly chain: DepositChain,
    private readonly escrowAddress: string,
    private readonly relayer: Relayer | null,
  ) {
    this.provider = makeProvider(chain.rpcUrl, { timeoutMs: chain.rpcTimeoutMs, chainId: chain.chainId });
    this.usdc = new Contract(formatAddress(chain.usdcAddress), usdcAbi, this.provider);
    this.outcomes = new Counter({
      name: 'settlement_deposit_sweeps_total',
      help: 'Deposit addresses handled by the sweeper, by outcome (swept, dust, empty, failed, finished)',
      labelNames: ['outcome'],
      registers: [ctx.metrics.registry],
    });
    this.loop = new PollingLoop(() => this.runPass().then(() => undefined), {
      what: 'deposit address sweep',
      logger: ctx.logger,
      intervalMs: config.intervalMs,
      maxBackoffMs: 60_000,
    });
  }

  async start(): Promise<void> {
    this.server = await serveRpcs(
      this.ctx.bus,
      'settlement',
      { 'settlement.deposit_holdings': (request) => this.holdings(request.limit) },
      this.ctx.logger,
    );
    if (this.relayer) this.loop.start();
    else {
      this.ctx.logger.warn(
        'RELAYER_PRIVATE_KEY is not set: session deposit addresses are not swept into escrow (the relayer pays their gas)',
      );
    }
  }

  async stop(): Promise<void> {
    await this.server?.stop();
    await this.loop.stop();
    this.provider.destroy();
  }

  kick(): void {
    this.loop.kick();
  }

  /** The addresses that may hold USDC the ledger counts as escrow (reconciliation reads their balances). */
  async holdings(limit: number): Promise<DepositHoldingsReply> {
    const rows = await this.ctx.db
      .selectFrom('deposit_addresses')
      .select('address')
      .where('holding', '=', true)
      .orderBy('address')
      .limit(limit + 1)
      .execute();
    return {
      addresses: rows.slice(0, limit).map((r) => getAddress(r.address)),
      truncated: rows.length > limit,
    };
  }

  /** One pass: finish the open sweeps, then read (and sweep) the addresses due, each step bounded. */
  async runPass(): Promise<DepositPassResult & { leader: boolean }> {
    const result: DepositPassResult = { finished: 0, swept: 0, dust: 0, empty: 0, failed: 0 };
    if (!this.relayer) return { ...result, leader: false };
    const leader = await this.ctx.db.transaction().execute(async (trx) => {
      const locked = await sql<{ locked: boolean }>`
        select pg_try_advisory_xact_lock(hashtextextended(${SWEEP_LOCK_KEY} || ':' || current_schema(), 0)) as locked`.execute(
        trx,
      );
      if (!locked.rows[0]?.locked) return false;
      await this.finishOpenSweeps(result);
      await this.sweepDueAddresses(result);
      return true;
    });
    for (const [outcome, n] of Object.entries(result)) if (n > 0) this.outcomes.inc({ outcome }, n);
    return { ...result, leader };
  }

  /** Sweeps recorded earlier: confirmed, failed, or (never submitted: a crash) submitted again as recorded. */
  private async finishOpenSweeps(result: DepositPassResult): Promise<void> {
    const open = await this.ctx.db
      .selectFrom('deposit_sweeps')
      .selectAll()
      .where('status', '=', 'open')
      .orderBy('created_at')
      .limit(this.config.batchSize)
      .execute();
    for (const sweep of open) {
      const relayed = await this.ctx.db
        .selectFrom('relayed_authorizations')
        .select(['status', 'tx_hash', 'settled_tx_hash', 'last_error'])
        .where('chain_id', '=', this.chain.chainId)
        .where('payer', '=', sweep.address)
        .where('auth_nonce', '=', sweep.auth_nonce)
        .executeTakeFirst();
      if (!relayed) {
        await this.submit(sweep, result);
      } else if (relayed.status === 'confirmed' || relayed.status === 'used_elsewhere') {
        await this.finish(sweep, 'confirmed', relayed.settled_tx_hash ?? relayed.tx_hash, null);
        result.finished++;
      } else if (relayed.status === 'failed') {
        await this.finish(sweep, 'failed', relayed.tx_hash, relayed.last_error ?? 'relayer gave up');
        result.failed++;
      }
      // signed / broadcast: the relayer's own pass rebroadcasts and finishes it.
    }
  }

  private async sweepDueAddresses(result: DepositPassResult): Promise<void> {
    const due = await this.ctx.db
      .selectFrom('deposit_addresses')
      .select(['address', 'derivation_index'])
      .where('check_due_at', '<=', new Date())
      .where('derivation_index', 'is not', null)
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('deposit_sweeps as s')
              .select('s.sweep_id')
              .whereRef('s.address', '=', 'deposit_addresses.address')
              .where('s.status', '=', 'open'),
          ),
        ),
      )
      .orderBy('check_due_at')
      .limit(this.config.batchSize)
      .execute();
    for (const row of due) {
      const balance = (await this.usdc.getFunction('balanceOf')(row.address)) as bigint;
      if (balance < this.config.minAmountMicro) {
        // Empty: nothing more to count. Dust: kept (and counted) until another transfer makes it worth a sweep.
        await this.ctx.db
          .updateTable('deposit_addresses')
          .set({
            holding: balance > 0n,
            check_due_at: null,
            last_balance_micro: balance,
            updated_at: new Date(),
          })
          .where('address', '=', row.address)
          .execute();
        if (balance === 0n) result.empty++;
        else result.dust++;
        continue;
      }
      const sweep = await this.record(row.address, Number(row.derivation_index), balance);
      if (sweep) await this.submit(sweep, result);
    }
  }

  /**
   * Signs the authorization of the whole balance to escrow with the address's derived key and records it (the
   * one open sweep of the address) before anything is submitted. Undefined when the key does not derive this
   * address (checkout's xpub is not this key's: a configuration error, logged, nothing signed).
   */
  async record(address: string, index: number, amountMicro: bigint): Promise<Sweep | undefined> {
    const key = this.config.node.deriveChild(index);
    if (key.address.toLowerCase() !== address) {
      this.ctx.logger.error(
        { address, derivationIndex: index },
        "deposit address is not this key's child: CHECKOUT_DEPOSIT_XPUB (checkout) and the deposit key (settlement) differ; not swept",
      );
      await this.ctx.db
        .updateTable('deposit_addresses')
        .set({ check_due_at: null, updated_at: new Date() })
        .where('address', '=', address)
        .execute();
      return undefined;
    }
    // The token judges validity by block time, not by this machine's clock.
    const latest = await this.provider.getBlock('latest');
    const now = latest?.timestamp ?? Math.floor(Date.now() / 1000);
    const authorization: TransferAuthorization = {
      from: key.address,
      to: formatAddress(this.escrowAddress),
      value: amountMicro.toString(),
      validAfter: String(now - 600),
      validBefore: String(now + this.config.validitySeconds),
      nonce: `0x${randomBytes(32).toString('hex')}`,
    };
    const signature = await key.signTypedData(
      usdcEip712Domain({
        chainId: this.chain.chainId,
        usdcAddress: this.chain.usdcAddress,
        eip712Name: this.chain.usdcEip712Name,
      }),
      TRANSFER_WITH_AUTHORIZATION_TYPES as unknown as Record<string, Array<{ name: string; type: string }>>,
      authorization,
    );
    return this.ctx.inTransaction(async (trx) => {
      await trx
        .updateTable('deposit_addresses')
        .set({ check_due_at: null, last_balance_micro: amountMicro, updated_at: new Date() })
        .where('address', '=', address)
        .execute();
      return trx
        .insertInto('deposit_sweeps')
        .values({
          sweep_id: `swp_${randomBytes(12).toString('hex')}`,
          address,
          amount_micro: amountMicro,
          auth_nonce: authorization.nonce.toLowerCase(),
          valid_after: BigInt(authorization.validAfter),
          valid_before: BigInt(authorization.validBefore),
          signature: signature.toLowerCase(),
          status: 'open',
          tx_hash: null,
          last_error: null,
          finished_at: null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    });
  }

  /** Submits a recorded sweep exactly as recorded (the relayer is idempotent per payer and nonce). */
  private async submit(sweep: Sweep, result: DepositPassResult): Promise<void> {
    const reply: RelayerSubmitReply = await this.relayer!.submit(
      {
        chainId: this.chain.chainId,
        token: formatAddress(this.chain.usdcAddress),
        authorization: {
          from: getAddress(sweep.address),
          to: formatAddress(this.escrowAddress),
          value: sweep.amount_micro.toString(),
          validAfter: sweep.valid_after.toString(),
          validBefore: sweep.valid_before.toString(),
          nonce: sweep.auth_nonce,
        },
        signature: sweep.signature,
        waitForReceiptMs: 0,
      },
      // The deposit address's key is Paygate's own: a revert never stops its sweeps.
      { ownKey: true },
    );
    if (reply.ok) {
      this.ctx.logger.info(
        { address: sweep.address, amountMicro: sweep.amount_micro.toString(), txHash: reply.txHash },
        'deposit address sweep submitted',
      );
      if (reply.status === 'confirmed') {
        await this.finish(sweep, 'confirmed', reply.txHash, null);
        result.finished++;
      }
      result.swept++;
      return;
    }
    // Refused before anything was sent (e.g. the balance moved, the relayer is out of gas): tried again later.
    if (reply.reason === 'relayer_out_of_gas' || reply.reason === 'chain_unavailable') {
      this.ctx.logger.warn(
        { address: sweep.address, reason: reply.reason },
        'deposit sweep waits for the relayer',
      );
      return;
    }
    await this.finish(sweep, 'failed', null, `${reply.reason}: ${reply.message}`);
    result.failed++;
  }

  private async finish(
    sweep: Sweep,
    status: 'confirmed' | 'failed',
    txHash: string | null,
    error: string | null,
  ): Promise<void> {
    await this.ctx.inTransaction(async (trx) => {
      await trx
        .updateTable('deposit_sweeps')
        .set({ status, tx_hash: txHash, last_error: error, finished_at: new Date() })
        .where('sweep_id', '=', sweep.sweep_id)
        .where('status', '=', 'open')
        .execute();
      // Read the balance again: now (confirmed: usually empty, or what arrived meanwhile) or after a pause.
      await trx
        .updateTable('deposit_addresses')
        .set({
          check_due_at: new Date(Date.now() + (status === 'failed' ? RETRY_AFTER_MS : 0)),
          updated_at: new Date(),
        })
        .where('address', '=', sweep.address)
        .execute();
    });
    if (status === 'failed') {
      this.ctx.logger.error(
        { address: sweep.address, error },
        'deposit address sweep failed; read again later',
      );
    } else {
      this.ctx.logger.info({ address: sweep.address, txHash }, 'deposit address swept into escrow');
    }
  }
}
