import type { Logger } from '@paygate/telemetry';
import { backoffCeilingMs } from './backoff';
import { settleWithin } from './timeout';

/** A pass's word on the next: nothing (wait the interval), `true` (run again at once) or `{ delayMs }`. */
// biome-ignore lint/suspicious/noConfusingVoidType: a pass with nothing to say is a plain `async () => {}`.
export type PassOutcome = void | boolean | { delayMs: number };

export interface PollingLoopOptions {
  /** Names the work in log lines: `${what} failed; will retry`. */
  what: string;
  logger: Logger;
  /** Pause between passes when a pass found nothing more to do. */
  intervalMs: number;
  /** Delay of the first pass after start(): 0 (default) runs it at once. */
  firstDelayMs?: number;
  /** With a bound, consecutive failures wait intervalMs * 2^failures up to it; without, the interval. */
  maxBackoffMs?: number;
  /** How a failed pass is reported; by default one warn line with the error per failure. */
  onFailure?: (error: unknown, consecutiveFailures: number) => void;
  /** Called by the first successful pass after failures. */
  onRecovered?: (failures: number) => void;
  /** Longest stop() waits for a running pass; by default until the pass ends. */
  stopWaitMs?: number;
}

/**
 * Runs one pass at a time: every `intervalMs`, at once when kicked (a kick during a pass runs another after
 * it), with optional backoff on failures; stop waits for the running pass. A failure never ends the loop.
 */
export class PollingLoop {
  private timer: NodeJS.Timeout | undefined;
  private current: Promise<void> | undefined;
  private pending = false;
  private stopped = true;
  private failures = 0;
  /** Callers of `runSoon` waiting for a pass that has not started yet, and for the one running now. */
  private waitingForNextPass: Array<() => void> = [];
  private waitingForCurrentPass: Array<() => void> = [];

  constructor(
    private readonly pass: () => Promise<PassOutcome>,
    private readonly options: PollingLoopOptions,
  ) {}

  get isStopped(): boolean {
    return this.stopped;
  }

  start(): void {
    this.stopped = false;
    this.schedule(this.options.firstDelayMs ?? 0);
  }

  kick(): void {
    if (this.stopped) return;
    if (this.current) {
      this.pending = true;
      return;
    }
    this.schedule(0);
  }

  /** Kicks, and resolves once a pass started after this call has ended (or at once when stopped). */
  runSoon(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    const ran = new Promise<void>((resolve) => this.waitingForNextPass.push(resolve));
    this.kick();
    return ran;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.releaseWaiters();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.current) return;
    const { stopWaitMs } = this.options;
    await (stopWaitMs === undefined ? this.current : settleWithin(this.current, stopWaitMs));
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.current || this.stopped) return;
      this.waitingForCurrentPass = this.waitingForNextPass;
      this.waitingForNextPass = [];
      this.current = this.runPass().then((nextDelayMs) => {
        this.current = undefined;
        for (const resolve of this.waitingForCurrentPass.splice(0)) resolve();
        this.schedule(nextDelayMs);
      });
    }, delayMs);
  }

  /** Runs the pass and returns the delay before the next one; never rejects. */
  private async runPass(): Promise<number> {
    const { intervalMs, maxBackoffMs } = this.options;
    let outcome: PassOutcome = false;
    try {
      outcome = await this.pass();
      if (this.failures > 0) this.report(() => this.options.onRecovered?.(this.failures));
      this.failures = 0;
    } catch (error) {
      this.failures++;
      this.report(() =>
        this.options.onFailure
          ? this.options.onFailure(error, this.failures)
          : this.options.logger.warn({ err: error }, `${this.options.what} failed; will retry`),
      );
    }
    const kicked = this.pending;
    this.pending = false;
    if (this.failures > 0 && maxBackoffMs !== undefined) {
      return backoffCeilingMs(this.failures + 1, { baseMs: intervalMs, maxMs: maxBackoffMs });
    }
    if (outcome === true || kicked) return 0;
    if (typeof outcome === 'object' && outcome !== null) return outcome.delayMs;
    return intervalMs;
  }

  private releaseWaiters(): void {
    for (const resolve of [...this.waitingForNextPass.splice(0), ...this.waitingForCurrentPass.splice(0)])
      resolve();
  }

  private report(fn: () => void): void {
    try {
      fn();
    } catch {
      // A failing log call must not end the loop.
    }
  }
}

/** A task that is one PollingLoop (its subclass builds `loop`); `afterStop` releases what the passes used. */
export abstract class PolledTask {
  protected abstract readonly loop: PollingLoop;

  start(): void {
    this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    await this.afterStop();
  }

  kick(): void {
    this.loop.kick();
  }

  /** What the passes held that must be released once none runs (a connection pool); nothing by default. */
  protected async afterStop(): Promise<void> {}
}
