import type { Purchase } from '../payments/service';
import type { GatewayState } from '../state';
import type { AuthorizationRow } from './authorizations';
import type { X402Outcome } from './payments';
import type { DecodedX402Payment } from './protocol';
import { PAYGATE_REASONS } from './reasons';
import { settledBefore } from './settlement';

const COPY_POLL_MS = 50;
const BEING_SETTLED = /being settled/;
const COPY_POLL_ROUNDS_MAX = 2000;

interface Running {
  outcome: Promise<X402Outcome>;
  /** Who the settlement is for: a copy for the same seller and resource shares its outcome. */
  purchaseKey: string;
}
const runningByState = new WeakMap<GatewayState, Map<string, Running>>();

interface CopyOptions {
  maxTimeoutSeconds?: number;
  share: boolean;
}

/**
 * Settles an x402 payment; a copy of a payment that is being settled (by this gateway or by another replica)
 * waits for that settlement instead of answering 503. With `share` (the facilitator), a copy for the same seller
 * and resource is answered with the in-flight settlement's outcome: the one payment is settled once and every
 * copy learns how. Without it (paid skill URLs, where a copy must not be served a second call), the copy is
 * presented again once the first is done, under the purchase's reuse rules.
 */
export async function settleAwaitingCopies(
  state: GatewayState,
  payment: DecodedX402Payment,
  purchase: Purchase,
  version: 1 | 2,
  options: CopyOptions,
): Promise<X402Outcome> {
  let running = runningByState.get(state);
  if (!running) {
    running = new Map();
    runningByState.set(state, running);
  }
  const a = payment.authorization;
  const id = `${a.from.toLowerCase()}:${a.nonce.toLowerCase()}:${payment.signature.toLowerCase()}`;
  const purchaseKey = `${purchase.sellerId}\n${purchase.resource}`;
  const first = running.get(id);
  if (first) {
    const outcome = await waitingAsCopy(
      state,
      first.outcome.catch(() => undefined),
    );
    if (options.share && outcome && first.purchaseKey === purchaseKey) {
      return outcome.ok ? { ...outcome, fresh: false } : outcome;
    }
  }
  if (running.has(id)) return settleOrWait(state, payment, purchase, version, options);
  const outcome = settleOrWait(state, payment, purchase, version, options);
  running.set(id, { outcome, purchaseKey });
  try {
    return await outcome;
  } finally {
    running.delete(id);
  }
}

/** Settles; presented while another replica (or a caller that gave up) settles it, waits for that settlement. */
async function settleOrWait(
  state: GatewayState,
  payment: DecodedX402Payment,
  purchase: Purchase,
  version: 1 | 2,
  options: CopyOptions,
): Promise<X402Outcome> {
  const settle = () =>
    state.x402.settle(payment, purchase, version, { maxTimeoutSeconds: options.maxTimeoutSeconds });
  const outcome = await settle();
  // Only a copy is waited for: the refusal X402Payments gives a payment someone else is settling (its own
  // attempt's 503s, after the relayer's wait, are answered as they are). x402-reference.test.ts pins the text.
  if (outcome.ok || outcome.reason !== PAYGATE_REASONS.unavailable || !BEING_SETTLED.test(outcome.message)) {
    return outcome;
  }
  const settled = await waitingAsCopy(state, settledElsewhere(state, payment));
  if (!settled) return outcome;
  if (
    options.share &&
    settled.state === 'settled' &&
    settled.seller_id === purchase.sellerId &&
    settled.resource === purchase.resource &&
    settled.claim_id
  ) {
    const claim = await state.x402.authorizations.claimById(settled.claim_id);
    if (claim) return settledBefore(claim);
  }
  return settle();
}

/** A copy's wait for the first settlement, counted in `gateway_x402_copies_waiting` while it lasts. */
async function waitingAsCopy<T>(state: GatewayState, wait: Promise<T>): Promise<T> {
  state.metrics.x402CopiesWaiting.inc();
  try {
    return await wait;
  } finally {
    state.metrics.x402CopiesWaiting.dec();
  }
}

/**
 * The authorization's row once it leaves `submitting` (bounded by how long a live caller may wait for its
 * inclusion and the relayer); undefined when it is not being settled with this signature, or still is.
 */
async function settledElsewhere(
  state: GatewayState,
  payment: DecodedX402Payment,
): Promise<AuthorizationRow | undefined> {
  const key = state.x402.authorizations.keyOf(payment.authorization);
  const deadline = Date.now() + state.config.x402InclusionWaitMs + state.config.relayerTimeoutMs;
  for (let round = 0; round < COPY_POLL_ROUNDS_MAX; round++) {
    const row = await state.x402.authorizations.find(key);
    if (!row || row.signature !== payment.signature.toLowerCase()) return undefined;
    if (row.state !== 'submitting') return row;
    if (Date.now() >= deadline) return undefined;
    await new Promise((resolve) => setTimeout(resolve, COPY_POLL_MS));
  }
  return undefined;
}
