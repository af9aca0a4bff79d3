import { usdcAbi } from '@paygate/chain';
import { Counter, PolledTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import { Contract, Wallet } from 'ethers';
import { type SettlementDB, tryAdvisoryLock } from '../db';
import type { EscrowChain } from '../transfers/chain';
import type { CheckoutSweepConfig } from './config';

type SweepOutcome = 'swept' | 'below_minimum' | 'in_flight' | 'not_leader' | 'failed';

/** Sweeps the old checkout wallet's whole USDC into escrow (nothing booked: escrow_asset counts both wallets). */
export class CheckoutSweeper extends PolledTask {
  protected readonly loop: PollingLoop;
  private readonly wallet: Wallet;
  private readonly usdc: Contract;
  private readonly swept: Counter<'outcome'>;

  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    private readonly config: CheckoutSweepConfig,
    private readonly escrow: EscrowChain,
  ) {
    super();
    this.wallet = new Wallet(config.privateKey, escrow.provider);
    this.usdc = new Contract(escrow.usdcAddress, usdcAbi, this.wallet);
    this.swept = new Counter({
      name: 'settlement_checkout_sweeps_total',
      help: 'Passes of the checkout deposit wallet sweeper, by outcome (failed: see the error log)',
      labelNames: ['outcome'],
      registers: [ctx.metrics.registry],
    });
    this.loop = new PollingLoop(() => this.runPass().then(() => undefined), {
      what: 'checkout deposit wallet sweep',
      logger: ctx.logger,
      intervalMs: config.intervalMs,
    });
  }

  async runPass(): Promise<SweepOutcome> {
    let outcome: SweepOutcome;
    try {
      outcome = await this.ctx.db
        .transaction()
        .execute(async (trx) =>
          (await tryAdvisoryLock(trx, 'settlement-checkout-sweep')) ? this.sweep() : 'not_leader',
        );
    } catch (error) {
      this.ctx.logger.error(
        { err: error, wallet: this.config.address },
        'checkout deposit wallet sweep failed (does the wallet hold ETH for gas?); retried next pass',
      );
      outcome = 'failed';
    }
    this.swept.inc({ outcome });
    return outcome;
  }

  private async sweep(): Promise<SweepOutcome> {
    const address = this.config.address;
    const [mined, pending] = await Promise.all([
      this.escrow.provider.getTransactionCount(address, 'latest'),
      this.escrow.provider.getTransactionCount(address, 'pending'),
    ]);
    if (pending > mined) return 'in_flight';
    const balance = (await this.usdc.getFunction('balanceOf')(address)) as bigint;
    if (balance < this.config.minAmountMicro) return 'below_minimum'; // CHECKOUT_SWEEP_MIN_MICRO is at least 1
    const tx = await this.usdc.getFunction('transfer')(this.escrow.address, balance);
    this.ctx.logger.info(
      { wallet: address, escrow: this.escrow.address, amountMicro: balance.toString(), txHash: tx.hash },
      'checkout deposit wallet swept into escrow',
    );
    return 'swept';
  }
}
