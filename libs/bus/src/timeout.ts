/** `promise`, or a rejection with `timedOut()` after `ms`; the timer is cleared either way. */
export function withTimeout<T>(promise: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Resolves once `promise` settles or `ms` have passed, whichever comes first (never rejects). */
export function settleWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  return withTimeout(promise, ms, () => new Error('timed out')).then(
    () => undefined,
    () => undefined,
  );
}
