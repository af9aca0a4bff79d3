/**
 * Requests queued in one turn of the event loop, or while `maxWrites` writes run, go into one write of at
 * most `maxPerWrite`. `fits` keeps an item out of a batch it must not share (it waits for the next write);
 * `write` settles each item of its batch and must not throw.
 */
interface WriteBatcherOptions<T> {
  maxWrites: number;
  maxPerWrite: number;
  fits(batch: readonly T[], item: T): boolean;
  write(batch: T[]): Promise<void>;
}

export class WriteBatcher<T> {
  private readonly queued: T[] = [];
  private writing = 0;
  private scheduled = false;

  constructor(private readonly options: WriteBatcherOptions<T>) {}

  add(item: T): void {
    this.queued.push(item);
    // After the I/O at hand: the requests that arrived with this one go in the same write.
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.writeQueued();
    });
  }

  private writeQueued(): void {
    if (this.writing >= this.options.maxWrites || this.queued.length === 0) return;
    const batch: T[] = [];
    const rest: T[] = [];
    for (const item of this.queued.splice(0)) {
      if (batch.length < this.options.maxPerWrite && this.options.fits(batch, item)) batch.push(item);
      else rest.push(item);
    }
    this.queued.push(...rest);
    // Nothing fits now (each waits for a write in flight, see fits): the end of that write starts the next.
    if (batch.length === 0) return;
    this.writing += 1;
    void this.options.write(batch).finally(() => {
      this.writing -= 1;
      this.writeQueued();
    });
  }
}
