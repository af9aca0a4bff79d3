import { smaller } from '../db';
import type { RelayerChain } from './chain';

/** Polled every DUE_POLL_MS from DUE_EARLY_MS before a block is due until DUE_LATE_MS after. */
const DUE_POLL_MS = 3;
const DUE_EARLY_MS = 8;
const DUE_LATE_MS = 22;
/** Blocks whose timestamps give the chain's block interval, at least. */
const INTERVAL_SPAN_BLOCKS = 20;
/** Whole-second timestamps: a 20 s span keeps the interval within 5%. */
const INTERVAL_SPAN_MIN_SEC = 20;
/** Blocks read back at most for that span. */
const INTERVAL_SPAN_MAX_BLOCKS = 1000;

export type HeadReads = Pick<RelayerChain, 'blockNumber' | 'blockTimestampSec'>;

interface Waiter {
  after: bigint | undefined;
  wake(): void;
}

/** Wakes receipt waiters at a newer head: one poll for all, dense when a block is due, only while someone waits. */
export class HeadWatcher {
  private head: bigint | undefined;
  /** The last head seen as it came: it appeared within `spreadMs` after `atMs`. */
  private anchor: { head: bigint; atMs: number; spreadMs: number } | undefined;
  private intervalMs: number | undefined;
  private intervalReadAt: bigint | undefined;
  private readonly waiters = new Set<Waiter>();
  private running = false;
  private stopped = false;

  constructor(
    private readonly chain: HeadReads,
    private readonly pollMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  known(): bigint | undefined {
    return this.head;
  }

  learnedIntervalMs(): number | undefined {
    return this.intervalMs;
  }

  /** Resolves at a head newer than `after` (the next poll when undefined), a failed poll, or after `maxWaitMs`. */
  newerThan(after: bigint | undefined, maxWaitMs: number): Promise<void> {
    if (this.stopped || (after !== undefined && this.head !== undefined && this.head > after)) {
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const waiter: Waiter = {
        after,
        wake: () => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          resolve();
        },
      };
      const timer = setTimeout(waiter.wake, Math.max(0, maxWaitMs));
      this.waiters.add(waiter);
      if (!this.running) void this.run();
    });
  }

  pushed(head: bigint): void {
    this.observe(head, this.now(), 0);
    this.wakeUpTo(head);
  }

  stop(): void {
    this.stopped = true;
    for (const waiter of [...this.waiters]) waiter.wake();
  }

  private async run(): Promise<void> {
    this.running = true;
    let previousPollAt: number | undefined;
    try {
      while (this.waiters.size > 0 && !this.stopped) {
        await new Promise((resolve) => setTimeout(resolve, this.delayMs()));
        const pollAt = this.now();
        let head: bigint;
        try {
          head = await this.chain.blockNumber();
        } catch {
          for (const waiter of [...this.waiters]) waiter.wake();
          previousPollAt = undefined;
          continue;
        }
        // A head that the previous poll of this run did not see appeared after that poll began.
        if (previousPollAt !== undefined) this.observe(head, previousPollAt, this.now() - previousPollAt);
        else if (this.head === undefined || head > this.head) this.head = head;
        previousPollAt = pollAt;
        this.wakeUpTo(head);
        if (this.intervalReadAt === undefined || head >= this.intervalReadAt + 1000n)
          void this.readInterval(head);
      }
    } finally {
      this.running = false;
      if (this.waiters.size > 0 && !this.stopped) void this.run();
    }
  }

  private wakeUpTo(head: bigint): void {
    for (const waiter of [...this.waiters]) {
      if (waiter.after === undefined || head > waiter.after) waiter.wake();
    }
  }

  private observe(head: bigint, atMs: number, spreadMs: number): void {
    if (this.head !== undefined && head <= this.head) return;
    this.head = head;
    this.anchor = { head, atMs, spreadMs };
  }

  private async readInterval(head: bigint): Promise<void> {
    this.intervalReadAt = head;
    const span = smaller(head, BigInt(INTERVAL_SPAN_BLOCKS));
    if (span < 2n) {
      this.intervalReadAt = undefined;
      return;
    }
    try {
      const [last, first] = await Promise.all([
        this.chain.blockTimestampSec(head),
        this.chain.blockTimestampSec(head - span),
      ]);
      let spanned = span;
      let seconds = last - first;
      if (seconds < BigInt(INTERVAL_SPAN_MIN_SEC) && spanned < head) {
        // Fast blocks: read as far back as the span needs at the rate seen.
        const perSec = Number(span) / Math.max(1, Number(seconds));
        const wanted = BigInt(Math.ceil(perSec * INTERVAL_SPAN_MIN_SEC * 1.2));
        spanned = smaller(smaller(wanted, head), BigInt(INTERVAL_SPAN_MAX_BLOCKS));
        seconds = last - (await this.chain.blockTimestampSec(head - spanned));
      }
      const ms = (Number(seconds) * 1000) / Number(spanned);
      this.intervalMs = ms > 0 ? ms : undefined;
    } catch {
      this.intervalReadAt = undefined; // read again at the next poll
    }
  }

  private delayMs(): number {
    const interval = this.intervalMs;
    const anchor = this.anchor;
    if (interval === undefined || anchor === undefined || interval < 4 * DUE_LATE_MS) return this.pollMs;
    const windowMs = DUE_EARLY_MS + anchor.spreadMs + DUE_LATE_MS;
    const densePollMs = Math.max(DUE_POLL_MS, Math.min(this.pollMs, Math.floor(anchor.spreadMs / 8)));
    if (windowMs >= interval) return densePollMs;
    const untilFirstWindow = interval - DUE_EARLY_MS - (this.now() - anchor.atMs);
    if (untilFirstWindow > 0) return Math.max(DUE_POLL_MS, Math.min(this.pollMs, untilFirstWindow));
    const intoWindow = -untilFirstWindow % interval;
    if (intoWindow < windowMs) return densePollMs;
    return Math.max(DUE_POLL_MS, Math.min(this.pollMs, interval - intoWindow));
  }
}
