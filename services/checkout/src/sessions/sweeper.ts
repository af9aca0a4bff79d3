import { type BackgroundTask, PolledTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import type { CheckoutDatabase, CheckoutTrx } from '../db';
import type { SessionStore } from './sessions';

/** Expires due sessions and frees the amounts of sessions past their late window, on an interval, one pass at a time. */
export class Sweeper extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(
    private readonly ctx: ServiceContext<CheckoutDatabase>,
    private readonly store: SessionStore,
    intervalMs: number,
  ) {
    super();
    this.loop = new PollingLoop(() => this.sweep(), {
      what: 'checkout sweep',
      logger: ctx.logger,
      intervalMs,
      firstDelayMs: intervalMs,
    });
  }

  private async sweep(): Promise<void> {
    const inTransaction = <T>(fn: (trx: CheckoutTrx) => Promise<T>) => this.ctx.inTransaction(fn);
    // Bounded: at most a few batches per pass; the next pass continues.
    for (let i = 0; i < 10 && (await this.store.expireDue(inTransaction)) > 0; i++);
    for (let i = 0; i < 10 && (await this.store.releaseLapsedReservations(inTransaction)) > 0; i++);
  }
}
