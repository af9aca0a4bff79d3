import { HttpError } from '@paygate/http';
import type { CheckoutReason } from './reasons';

/**
 * Checkout's errors. Answers to a caller are `HttpError`s (libs/http) with a code of reasons.ts, `RetryLaterError`
 * when a retry can pass; below the HTTP layer one base, `CheckoutError`, and a named subclass per situation.
 */
export class CheckoutError extends Error {
  override name = 'CheckoutError';
}

/** CHECKOUT_DEPOSIT_XPUB holds a private extended key: checkout never holds a key that can move deposits. */
export class PrivateDepositKeyError extends CheckoutError {
  override name = 'PrivateDepositKeyError';
  constructor() {
    super('must be an extended public key (xpub…), never a private one');
  }
}

/** Every non-hardened child index of the deposit xpub is taken: an operator configures a new xpub. */
export class DepositIndexesExhaustedError extends CheckoutError {
  override name = 'DepositIndexesExhaustedError';
  constructor() {
    super('every child index of CHECKOUT_DEPOSIT_XPUB is used: configure a new deposit xpub');
  }
}

/** A refusal that a later retry can pass: answered with `Retry-After` (both transports set it). */
export class RetryLaterError extends HttpError {
  constructor(
    status: 429 | 503,
    code: CheckoutReason,
    message: string,
    readonly retryAfterSeconds: number,
    details: { field?: string; rule?: string; [key: string]: unknown } = {},
  ) {
    super(status, code, message, { ...details, retryAfterSeconds });
  }
}

/** An answer the ledger's contract rules out (a claim refused for an unknown reason, a paid session without a payment). */
export class CheckoutInvariantError extends CheckoutError {
  override name = 'CheckoutInvariantError';
}
