import { randomBytes } from 'node:crypto';
import { type RpcServer, serveRpcs } from '@paygate/bus';
import { TRANSFER_WITH_AUTHORIZATION_TYPES, usdcEip712Domain } from '@paygate/chain';
import type { DepositHoldingsReply, RelayerSubmitReply, TransferAuthorization } from '@paygate/contracts';
import { Counter, PolledTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import { getAddress } from 'ethers';
import type { Selectable } from 'kysely';
import { type DepositSweepsTable, type SettlementDB, tryAdvisoryLock } from '../db';
import type { Relayer } from '../relayer/relayer';
import type { EscrowChain } from '../transfers/chain';
import type { DepositSweepConfig } from './config';

type Sweep = Selectable<DepositSweepsTable>;
type DepositPassResult = Record<'finished' | 'swept' | 'dust' | 'empty' | 'failed', number>;

/** A refused or failed sweep's address is read again after this long. */
const RETRY_AFTER_MS = 60_000;

/** Sweeps each deposit address whole into escrow: an EIP-3009 authorization recorded before the relayer submits it. */
export class DepositSweeper extends PolledTask {
  protected readonly loop: PollingLoop;
  private readonly outcomes: Counter<'outcome'>;
  private server: RpcServer | undefined;

  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    private readonly config: DepositSweepConfig,
    private readonly escrow: EscrowChain,
    private readonly usdcEip712Name: string,
    private readonly relayer: Relayer | null,
  ) {
    super();
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

  override async start(): Promise<void> {
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

  override async stop(): Promise<void> {
    await this.server?.stop();
    await super.stop();
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

  async runPass(): Promise<DepositPassResult & { leader: boolean }> {
    const result: DepositPassResult = { finished: 0, swept: 0, dust: 0, empty: 0, failed: 0 };
    if (!this.relayer) return { ...result, leader: false };
    const leader = await this.ctx.db.transaction().execute(async (trx) => {
      if (!(await tryAdvisoryLock(trx, 'settlement-deposit-sweep'))) return false;
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
        .where('chain_id', '=', this.escrow.chainId)
        .where('payer', '=', sweep.address)
        .where('auth_nonce', '=', sweep.auth_nonce)
        .executeTakeFirst();
      // signed / broadcast: the relayer's own pass rebroadcasts and finishes it.
      if (!relayed) await this.submit(sweep, result);
      else if (relayed.status === 'confirmed' || relayed.status === 'used_elsewhere') {
        await this.finish(sweep, result, 'confirmed', relayed.settled_tx_hash ?? relayed.tx_hash, null);
      } else if (relayed.status === 'failed') {
        await this.finish(sweep, result, 'failed', relayed.tx_hash, relayed.last_error ?? 'relayer gave up');
      }
    }
  }

  private async sweepDueAddresses(result: DepositPassResult): Promise<void> {
    const due = await this.ctx.db
      .selectFrom('deposit_addresses')
      .select(['address', 'derivation_index'])
      .where('check_due_at', '<=', new Date())
      .where('derivation_index', 'is not', null)
      .where('address', 'not in', (eb) =>
        eb.selectFrom('deposit_sweeps').select('address').where('status', '=', 'open'),
      )
      .orderBy('check_due_at')
      .limit(this.config.batchSize)
      .execute();
    for (const row of due) {
      const balance = await this.escrow.usdcBalanceOf(row.address);
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
        result[balance === 0n ? 'empty' : 'dust']++;
        continue;
      }
      const sweep = await this.record(row.address, Number(row.derivation_index), balance);
      if (sweep) await this.submit(sweep, result);
    }
  }

  /** Signs and records the address's open sweep; undefined when the key does not derive this address. */
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
    const latest = await this.escrow.provider.getBlock('latest');
    const now = latest?.timestamp ?? Math.floor(Date.now() / 1000);
    const authorization: TransferAuthorization = {
      from: key.address,
      to: this.escrow.address,
      value: amountMicro.toString(),
      validAfter: String(now - 600),
      validBefore: String(now + this.config.validitySeconds),
      nonce: `0x${randomBytes(32).toString('hex')}`,
    };
    const signature = await key.signTypedData(
      usdcEip712Domain({
        chainId: this.escrow.chainId,
        usdcAddress: this.escrow.usdcAddress,
        eip712Name: this.usdcEip712Name,
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
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    });
  }

  /** Submits a recorded sweep exactly as recorded (the relayer is idempotent per payer and nonce). */
  private async submit(sweep: Sweep, result: DepositPassResult): Promise<void> {
    const reply: RelayerSubmitReply = await this.relayer!.submit(
      {
        chainId: this.escrow.chainId,
        token: this.escrow.usdcAddress,
        authorization: {
          from: getAddress(sweep.address),
          to: this.escrow.address,
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
      if (reply.status === 'confirmed') await this.finish(sweep, result, 'confirmed', reply.txHash, null);
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
    await this.finish(sweep, result, 'failed', null, `${reply.reason}: ${reply.message}`);
  }

  private async finish(
    sweep: Sweep,
    result: DepositPassResult,
    status: 'confirmed' | 'failed',
    txHash: string | null,
    error: string | null,
  ): Promise<void> {
    result[status === 'failed' ? 'failed' : 'finished']++;
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
