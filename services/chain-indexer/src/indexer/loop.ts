import { type BackgroundTask, type Gauge, type PassOutcome, PolledTask, PollingLoop } from '@paygate/runtime';
import type { Logger } from '@paygate/telemetry';
import type { AdvisoryLeadership } from './leader';
import type { TransferScanner } from './scanner';

interface IndexerLoopOptions {
  pollIntervalMs: number;
  leaderRetryMs: number;
  onPass?: (result: Awaited<ReturnType<TransferScanner['runPass']>>) => void;
  headGauge?: Gauge;
  leaderGauge?: Gauge;
}

/** Polls the head every pollIntervalMs while leading, and tries to lead every leaderRetryMs while following. */
export class IndexerLoop extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(
    private readonly scanner: TransferScanner,
    private readonly leadership: AdvisoryLeadership,
    private readonly logger: Logger,
    private readonly options: IndexerLoopOptions,
  ) {
    super();
    this.loop = new PollingLoop(() => this.tick(), {
      what: 'indexer pass',
      logger,
      intervalMs: options.pollIntervalMs,
      maxBackoffMs: 5000,
      onFailure: (error, failures) => {
        // One line per failure streak step, not a stack trace per tick.
        if (failures === 1 || failures % 50 === 0) {
          this.logger.warn(
            { reason: (error as Error).message?.split('\n')[0], failures },
            'indexer pass failed; retrying',
          );
        }
      },
      onRecovered: () => this.logger.info('chain reads recovered'),
    });
  }

  private async tick(): Promise<PassOutcome> {
    const leading = await this.leadership.tryAcquire();
    this.options.leaderGauge?.set(leading ? 1 : 0);
    if (!leading) {
      this.scanner.forgetSettledTip();
      return { delayMs: this.options.leaderRetryMs };
    }
    const result = await this.scanner.runPass();
    this.options.headGauge?.set(result.head);
    this.options.onPass?.(result);
    return undefined;
  }

  /** Once no pass runs: the leadership lock, so another replica can take over. */
  protected override async afterStop(): Promise<void> {
    await this.leadership.release();
  }
}
