import { StartupError } from './errors';

interface RetryOptions {
  what: string;
  attempts: number;
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** Where each failed attempt is reported (a service's logger; any object with `warn`). */
  logger: { warn(message: string): void };
  /** Which failures are worth another attempt (default: all); any other is thrown at once, as it is. */
  retryable?: (error: unknown) => boolean;
}

export function describeError(error: unknown): string {
  const e = error as { code?: string; message?: string; errors?: unknown[] };
  if (e?.code && e.message) return `${e.code}: ${e.message.split('\n')[0]}`;
  if (Array.isArray(e?.errors) && e.errors.length > 0) return describeError(e.errors[0]);
  return String(e?.message ?? error).split('\n')[0] ?? 'unknown error';
}

/** Retries `fn` with bounded backoff, one log line per failure, then throws a one-line StartupError. */
export async function retryStartup<T>(fn: () => Promise<T>, options: RetryOptions): Promise<T> {
  let delay = options.initialDelayMs ?? 500;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      if (options.retryable && !options.retryable(error)) throw error;
      const reason = describeError(error);
      if (attempt >= options.attempts) {
        throw new StartupError(`cannot reach ${options.what} (${reason}); gave up after ${attempt} attempts`);
      }
      options.logger.warn(
        `cannot reach ${options.what} (${reason}); retrying in ${delay} ms (attempt ${attempt}/${options.attempts})`,
      );
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, options.maxDelayMs ?? 5000);
    }
  }
}
