import { type BackgroundTask, type Gauge, type PassOutcome, PolledTask, PollingLoop } from '@paygate/runtime';
import type { Logger } from '@paygate/telemetry';
import type { ChainIndexerConfig } from '../config';
import type { AdvisoryLeadership } from './leader';
import type { TransferScanner } from './scanner';

/** Polls the head every pollIntervalMs while leading, and tries to lead every leaderRetryMs while following. */
export class IndexerLoop extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(
    private readonly scanner: TransferScanner,
    private readonly leadership: AdvisoryLeadership,
    private readonly logger: Logger,
    private readonly config: Pick<ChainIndexerConfig, 'pollIntervalMs' | 'leaderRetryMs'>,
    private readonly gauges: { head: Gauge; leader: Gauge },
    private readonly onPass: (result: Awaited<ReturnType<TransferScanner['runPass']>>) => void,
  ) {
    super();
    this.loop = new PollingLoop(() => this.tick(), {
      what: 'indexer pass',
      logger,
      intervalMs: config.pollIntervalMs,
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
    this.gauges.leader.set(leading ? 1 : 0);
    if (!leading) {
      this.scanner.forgetSettledTip();
      return { delayMs: this.config.leaderRetryMs };
    }
    const result = await this.scanner.runPass();
    this.gauges.head.set(result.head);
    this.onPass(result);
    return undefined;
  }

  /** Once no pass runs: the leadership lock, so another replica can take over. */
  protected override async afterStop(): Promise<void> {
    await this.leadership.release();
  }
}
