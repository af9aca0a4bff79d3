import { formatAddress, makeProvider, usdcAbi } from '@paygate/chain';
import { Counter, type ServiceContext } from '@paygate/runtime';
import { Contract, Wallet } from 'ethers';
import { sql } from 'kysely';
import type { SettlementDB } from '../db';
import type { CheckoutSweepConfig } from './config';

export type SweepOutcome = 'swept' | 'below_minimum' | 'in_flight' | 'not_leader' | 'failed';

/** One sweeper across replicas: the pass runs only where this transaction-scoped advisory lock was free. It is named
 * with the schema: two deployments (or two test suites) sharing a database each have their own sweeper. */
const SWEEP_LOCK_KEY = 'settlement-checkout-sweep';

/**
 * Moves the checkout deposit wallet's USDC into the escrow wallet, from which payouts and refunds are paid.
 * Nothing is booked: the ledger's escrow_asset is the USDC of both wallets (reconciliation adds them up) and
 * the indexer does not report a move between them, so the books match the chain before, during and after a
 * sweep. A sweep is one plain transfer of the whole balance, signed by the deposit wallet (which pays its own
 * gas); a repeated or reorged sweep only moves what is there, so no exactly-once bookkeeping is needed. One
 * transaction in flight at a time: a pass that finds the wallet's pending nonce ahead of its mined one waits.
 */
export class CheckoutSweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private readonly provider;
  private readonly wallet: Wallet;
  private readonly usdc: Contract;
  private readonly swept: Counter<'outcome'>;

  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    private readonly config: CheckoutSweepConfig,
    chain: { rpcUrl: string; chainId: number; usdcAddress: string; rpcTimeoutMs: number },
    private readonly escrowAddress: string,
  ) {
    this.provider = makeProvider(chain.rpcUrl, { timeoutMs: chain.rpcTimeoutMs, chainId: chain.chainId });
    this.wallet = new Wallet(config.privateKey, this.provider);
    this.usdc = new Contract(formatAddress(chain.usdcAddress), usdcAbi, this.wallet);
    this.swept = new Counter({
      name: 'settlement_checkout_sweeps_total',
      help: 'Passes of the checkout deposit wallet sweeper, by outcome (failed: see the error log)',
      labelNames: ['outcome'],
      registers: [ctx.metrics.registry],
    });
  }

  get address(): string {
    return this.config.address;
  }

  start(): void {
    const tick = () => {
      this.running = this.runPass()
        .catch(() => undefined)
        .finally(() => {
          if (this.timer !== undefined) this.timer = setTimeout(tick, this.config.intervalMs);
        });
    };
    this.timer = setTimeout(tick, 0);
  }

  async stop(): Promise<void> {
    const timer = this.timer;
    this.timer = undefined;
    if (timer) clearTimeout(timer);
    await this.running;
    this.provider.destroy();
  }

  /** One pass: sweeps the whole balance when it is at least the minimum and nothing is in flight. */
  async runPass(): Promise<{ outcome: SweepOutcome; amountMicro?: bigint; txHash?: string }> {
    let result: { outcome: SweepOutcome; amountMicro?: bigint; txHash?: string };
    try {
      result = await this.ctx.db.transaction().execute(async (trx) => {
        const locked = await sql<{ locked: boolean }>`
          select pg_try_advisory_xact_lock(hashtextextended(${SWEEP_LOCK_KEY} || ':' || current_schema(), 0)) as locked`.execute(
          trx,
        );
        if (!locked.rows[0]?.locked) return { outcome: 'not_leader' as const };
        return this.sweep();
      });
    } catch (error) {
      this.ctx.logger.error(
        { err: error, wallet: this.config.address },
        'checkout deposit wallet sweep failed (does the wallet hold ETH for gas?); retried next pass',
      );
      result = { outcome: 'failed' };
    }
    this.swept.inc({ outcome: result.outcome });
    return result;
  }

  private async sweep(): Promise<{ outcome: SweepOutcome; amountMicro?: bigint; txHash?: string }> {
    const address = this.config.address;
    const [mined, pending] = await Promise.all([
      this.provider.getTransactionCount(address, 'latest'),
      this.provider.getTransactionCount(address, 'pending'),
    ]);
    if (pending > mined) return { outcome: 'in_flight' };
    const balance = (await this.usdc.getFunction('balanceOf')(address)) as bigint;
    if (balance < this.config.minAmountMicro || balance === 0n) return { outcome: 'below_minimum' };
    const tx = await this.usdc.getFunction('transfer')(this.escrowAddress, balance);
    this.ctx.logger.info(
      { wallet: address, escrow: this.escrowAddress, amountMicro: balance.toString(), txHash: tx.hash },
      'checkout deposit wallet swept into escrow',
    );
    return { outcome: 'swept', amountMicro: balance, txHash: tx.hash as string };
  }
}
