import { type BackgroundTask, PolledTask, PollingLoop } from '@paygate/runtime';
import type { Logger } from '@paygate/telemetry';
import type { SessionStore } from './sessions';

/** Expires due sessions and frees the amounts of sessions past their late window, on an interval, one pass at a time. */
export class Sweeper extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(
    logger: Logger,
    private readonly store: SessionStore,
    intervalMs: number,
  ) {
    super();
    this.loop = new PollingLoop(() => this.sweep(), {
      what: 'checkout sweep',
      logger,
      intervalMs,
      firstDelayMs: intervalMs,
    });
  }

  private async sweep(): Promise<void> {
    // Bounded: at most a few batches per pass; the next pass continues.
    for (let i = 0; i < 10 && (await this.store.expireDue()) > 0; i++);
    for (let i = 0; i < 10 && (await this.store.releaseLapsedReservations()) > 0; i++);
  }
}
