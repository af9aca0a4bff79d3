import type { BackgroundTask, Gauge } from '@paygate/runtime';
import type { Logger } from '@paygate/telemetry';
import type { AdvisoryLeadership } from './leader';
import type { TransferScanner } from './scanner';

export interface IndexerLoopOptions {
  pollIntervalMs: number;
  leaderRetryMs: number;
  onPass?: (result: Awaited<ReturnType<TransferScanner['runPass']>>) => void;
  headGauge?: Gauge;
  leaderGauge?: Gauge;
}

/**
 * Polls the head every pollIntervalMs while leading (a new block is noticed within one interval), and retries
 * leadership every leaderRetryMs while following. A failed pass is logged and retried on the next tick.
 */
export class IndexerLoop implements BackgroundTask {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private consecutiveFailures = 0;

  constructor(
    private readonly scanner: TransferScanner,
    private readonly leadership: AdvisoryLeadership,
    private readonly logger: Logger,
    private readonly options: IndexerLoopOptions,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick().finally(() => {
        this.running = undefined;
      });
    }, delayMs);
  }

  private async tick(): Promise<void> {
    const leading = await this.leadership.tryAcquire();
    this.options.leaderGauge?.set(leading ? 1 : 0);
    if (!leading) {
      this.schedule(this.options.leaderRetryMs);
      return;
    }
    try {
      const result = await this.scanner.runPass();
      this.options.headGauge?.set(result.head);
      this.options.onPass?.(result);
      if (this.consecutiveFailures > 0) this.logger.info('chain reads recovered');
      this.consecutiveFailures = 0;
    } catch (error) {
      this.consecutiveFailures++;
      // One line per failure streak step, not a stack trace per tick.
      if (this.consecutiveFailures === 1 || this.consecutiveFailures % 50 === 0) {
        this.logger.warn(
          { reason: (error as Error).message?.split('\n')[0], failures: this.consecutiveFailures },
          'indexer pass failed; retrying',
        );
      }
    }
    this.schedule(
      this.consecutiveFailures > 0
        ? Math.min(5000, this.options.pollIntervalMs * 2 ** this.consecutiveFailures)
        : this.options.pollIntervalMs,
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
    await this.leadership.release();
  }
}
