/**
 * The run's load: the sellers and buyers of participants.ts (one worker per buyer, so nonces never race), and a
 * seeded mix of operations sent through the balancer while faults happen:
 *
 * - `payment`: a tx-hash 402 payment: the 402, a USDC transfer on chain, then the paid call with the proof and
 *   0–2 concurrent replays of the same proof; at most one of them may be served. A call that met no replica is
 *   presented again (bounded), as an agent would.
 * - `x402`: an x402 payment with the standard client (EIP-3009 authorization, relayed gasless by settlement).
 * - `settleNow`: the operator's settle-now for one seller.
 * - `refund`: a seller refund (full or partial) of one of its paid transactions.
 * - `failingX402`, `failingMcp`, `failingPayment`: paid calls the seller fails (failing-calls.ts), each charged once
 *   and to be refunded to its payer after its window, made in turn by agents of their own (the failing agents,
 *   beside the buyers: the buyers' draws stay those of their seed).
 *
 * Every acknowledged outcome is recorded for the invariants: which transfers were served, which refunds and
 * settlements were accepted.
 */
import { createAgent, PAYMENT_HEADER, type PaymentRequirements } from '@paygate/agent-client';
import type { Wallet } from 'ethers';
import { checkoutByTransfer, checkoutByWallet, refundRequest, unmatchedTransfer } from './checkout-load';
import { type FailingCall, failingMcp, failingPayment, failingX402 } from './failing-calls';
import { type CheckoutMatching, errorCode, type Seller } from './participants';
import type { Prng } from './prng';
import { payWithX402 } from './x402-payment';

/** The operations the buyers draw by weight (WEIGHTS), and those the failing agents make (FAILING_KINDS). */
export type OperationKind = DrawnKind | FailingKind;

export type FailingKind = 'failingX402' | 'failingMcp' | 'failingPayment';
/** A failing agent's calls in turn, so each channel pays a steady share. */
const FAILING_KINDS: readonly FailingKind[] = ['failingX402', 'failingMcp', 'failingPayment'];

export type DrawnKind =
  | 'payment'
  | 'x402'
  | 'verify'
  | 'checkoutTransfer'
  | 'checkoutWallet'
  | 'unmatchedTransfer'
  | 'refundRequest'
  | 'settleNow'
  | 'refund';

export interface LoadRecord {
  operations: Record<string, Record<string, number>>;
  /** tx hash → number of 200 answers it bought (must be ≤ 1) and the seller it paid. */
  /** (`payer`: set for payments whose transaction is the buyer's own USDC transfer: what a refund request names.) */
  served: Map<string, { count: number; sellerId: string; amount: string; payer?: string }>;
  /** Transfers sent whose call was never served (the money is in escrow, unclaimed or claimed and failed). */
  unserved: string[];
  refundsAccepted: string[];
  /** Paid calls the seller failed (a transaction charged, no answer served): each must come back to its payer. */
  failing: FailingCall[];
  /** Checkout sessions whose payment was mined: a widget that reconnects must see each of them paid. */
  checkoutPaid: Array<{ sessionId: string; txHash: string; matching: CheckoutMatching }>;
  /** Checkout sessions the load saw paid (paid, paid_late, overpaid), by how they were matched. */
  checkoutPaidByMode: Record<CheckoutMatching, number>;
  /** Mid-run account changes (key rotation, payout address): what happened, for the report. */
  accountChanges: string[];
  /** When each payment succeeded (ms since epoch): recovery times are measured on these. */
  successTimes: number[];
  /** HTTP requests that carried an operation (a payment's presentations and replays, both copies of a refund…). */
  requests: number;
}

export function emptyRecord(): LoadRecord {
  return {
    operations: {},
    served: new Map(),
    unserved: [],
    refundsAccepted: [],
    failing: [],
    checkoutPaid: [],
    checkoutPaidByMode: { amount: 0, deposit_address: 0 },
    accountChanges: [],
    successTimes: [],
    requests: 0,
  };
}

function count(record: LoadRecord, kind: string, outcome: string): void {
  record.operations[kind] ??= {};
  record.operations[kind]![outcome] = (record.operations[kind]![outcome] ?? 0) + 1;
}

/**
 * A paid call served `times(count so far)` more times (the first time, who paid whom and how much), and when: the
 * served count the invariants check, and the success the recovery times are measured on.
 */
function recordServed(
  record: LoadRecord,
  txHash: string,
  payment: { sellerId: string; amount: string; payer?: string },
  times: (countSoFar: number) => number,
): void {
  const entry = record.served.get(txHash) ?? { count: 0, ...payment };
  entry.count += times(entry.count);
  record.served.set(txHash, entry);
  record.successTimes.push(Date.now());
}

export interface LoadOptions {
  baseUrl: string;
  usdcAddress: string;
  escrowAddress: string;
  checkoutEscrowAddress: string;
  operatorToken: string;
  sellers: Seller[];
  buyers: Wallet[];
  /** Agents that only pay calls the seller fails, one worker each (none: no failing calls). */
  failingAgents?: Wallet[];
  prng: Prng;
  operations: number;
  /** Pause between one worker's operations (the rate the two cores carry). */
  pauseMs: number;
  /** The profile's changes to the operations' weights (WEIGHTS). */
  weights?: Partial<Record<DrawnKind, number>>;
  record: LoadRecord;
  shouldStop: () => boolean;
}

const OPERATION_DEADLINE_MS = 45_000;

function withDeadline(operation: Promise<string>, ms: number): Promise<string> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    operation,
    new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve('timed out (45 s)'), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export const WEIGHTS: Record<DrawnKind, number> = {
  payment: 40,
  x402: 14,
  verify: 8,
  checkoutTransfer: 8,
  checkoutWallet: 6,
  unmatchedTransfer: 3,
  refundRequest: 6,
  settleNow: 6,
  refund: 9,
};

export async function runLoad(options: LoadOptions): Promise<void> {
  let issued = 0;
  const weights = { ...WEIGHTS, ...options.weights };
  const workers = options.buyers.map(async (buyer, w) => {
    const prng = options.prng.fork(`worker-${w}`);
    const agent = createAgent({ wallet: buyer, maxPricePerCall: '1', confirmationTimeoutMs: 20_000 });
    while (issued < options.operations && !options.shouldStop()) {
      issued++;
      const kind = prng.weighted(weights);
      const seller = prng.pick(options.sellers);
      let outcome: string;
      try {
        const operations: Record<DrawnKind, () => Promise<string>> = {
          payment: () => payment(options, agent, seller, prng, buyer.address.toLowerCase()),
          x402: () => x402(options, buyer, seller),
          verify: () => verify(options, agent, seller, prng, buyer.address.toLowerCase()),
          checkoutTransfer: () => checkoutByTransfer(options, buyer, seller, prng),
          checkoutWallet: () => checkoutByWallet(options, buyer, seller),
          unmatchedTransfer: () => unmatchedTransfer(options, buyer, prng),
          refundRequest: () => refundRequest(options, buyer, seller, prng),
          settleNow: () => settleNow(options, seller),
          refund: () => refund(options, seller, prng),
        };
        const operation = operations[kind]();
        // Every operation is bounded: one stuck on a dropped transaction never holds the run.
        outcome = await withDeadline(operation, OPERATION_DEADLINE_MS);
      } catch (error) {
        outcome = `error: ${(error as Error).message.slice(0, 60)}`;
      }
      count(options.record, kind, outcome);
      await new Promise((r) => setTimeout(r, options.pauseMs));
    }
  });
  await Promise.all([
    ...workers,
    ...(options.failingAgents ?? []).map((agent, w) => failingAgent(options, agent, w)),
  ]);
}

/**
 * One failing agent: the failing calls' channels in turn (x402, MCP, tx hash) on a seller drawn from its own
 * stream, for as long as the buyers go on; not counted in the buyers' operations.
 */
async function failingAgent(options: LoadOptions, buyer: Wallet, w: number): Promise<void> {
  const prng = options.prng.fork(`failing-agent-${w}`);
  const agent = createAgent({ wallet: buyer, maxPricePerCall: '1', confirmationTimeoutMs: 20_000 });
  for (let n = w; !options.shouldStop(); n++) {
    const kind = FAILING_KINDS[n % FAILING_KINDS.length]!;
    const seller = prng.pick(options.sellers);
    const calls: Record<FailingKind, () => Promise<string>> = {
      failingX402: () => failingX402(options, buyer, seller, prng),
      failingMcp: () => failingMcp(options, agent, buyer, seller, prng),
      failingPayment: () => failingPayment(options, agent, buyer, seller, prng),
    };
    const outcome = await withDeadline(calls[kind](), OPERATION_DEADLINE_MS).catch(
      (error: Error) => `error: ${error.message.slice(0, 60)}`,
    );
    count(options.record, kind, outcome);
    await new Promise((r) => setTimeout(r, options.pauseMs));
  }
}

export async function payment(
  options: LoadOptions,
  agent: ReturnType<typeof createAgent>,
  seller: Seller,
  prng: Prng,
  payer: string,
): Promise<string> {
  const url = `${options.baseUrl}/api/v1/skills/${seller.skill}/work`;
  const challenge = await fetch(url, { signal: AbortSignal.timeout(15_000) });
  options.record.requests++;
  if (challenge.status !== 402) return `challenge ${challenge.status} ${await errorCode(challenge)}`;
  const requirements = (await challenge.json()) as PaymentRequirements;
  const paid = await agent.pay(url, requirements);
  const replays = prng.int(0, 2);
  // Presented until one presentation is served or refused for good (bounded): a 5xx or 503 means no replica took it.
  for (let round = 0; round < 5; round++) {
    options.record.requests += 1 + replays;
    const answers = await Promise.all(
      Array.from({ length: 1 + replays }, () =>
        fetch(url, { headers: { [PAYMENT_HEADER]: paid.header }, signal: AbortSignal.timeout(10_000) })
          .then(async (r) => ({ status: r.status, body: await r.text() }))
          .catch(() => ({ status: 0, body: '' })),
      ),
    );
    const served = answers.filter((a) => a.status === 200).length;
    if (served > 0) {
      recordServed(
        options.record,
        paid.txHash,
        { sellerId: seller.sellerId, amount: paid.amount, payer },
        () => served,
      );
      return served === 1 ? 'served' : 'served MORE THAN ONCE';
    }
    const retriable = answers.every(
      (a) => a.status === 0 || a.status >= 500 || /not_confirmed|confirm/i.test(a.body),
    );
    if (!retriable) {
      options.record.unserved.push(paid.txHash);
      return `refused ${answers.map((a) => a.status).join('/')}`;
    }
    await new Promise((r) => setTimeout(r, 1000 * (round + 1)));
  }
  options.record.unserved.push(paid.txHash);
  return 'not served (gave up)';
}

export async function x402(
  options: LoadOptions,
  buyer: Wallet,
  seller: Seller,
  phasesMs?: Map<string, number[]>,
): Promise<string> {
  options.record.requests += 2;
  const outcome = await payWithX402(`${options.baseUrl}/api/v1/skills/${seller.skill}/work`, buyer);
  if (outcome.status === 200 && outcome.txHash) {
    for (const [phase, ms] of Object.entries(outcome.phasesMs ?? {})) {
      if (!phasesMs?.has(phase)) phasesMs?.set(phase, []);
      phasesMs?.get(phase)?.push(ms);
    }
    recordServed(options.record, outcome.txHash, { sellerId: seller.sellerId, amount: '' }, () => 1);
    return 'served';
  }
  return `status ${outcome.status} ${outcome.code ?? ''}`.trim();
}

export async function settleNow(options: LoadOptions, seller: Seller): Promise<string> {
  options.record.requests++;
  const response = await fetch(`${options.baseUrl}/api/v1/operator/settlements/run`, {
    method: 'POST',
    headers: { authorization: `Bearer ${options.operatorToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ sellerId: seller.sellerId }),
    signal: AbortSignal.timeout(30_000),
  });
  return response.ok ? 'accepted' : `status ${response.status} ${await errorCode(response)}`;
}

export async function refund(options: LoadOptions, seller: Seller, prng: Prng): Promise<string> {
  const list = await fetch(`${options.baseUrl}/api/v1/transactions?limit=20`, {
    headers: { authorization: `Bearer ${seller.apiKey}` },
    signal: AbortSignal.timeout(15_000),
  });
  if (!list.ok) return `list ${list.status} ${await errorCode(list)}`;
  const { data } = (await list.json()) as { data: Array<{ transactionId: string; amount: string }> };
  if (!data?.length) return 'nothing to refund';
  const transaction = prng.pick(data);
  const full = prng.chance(0.5);
  const amount = full ? transaction.amount : '0.01';
  const key = `chaos-${transaction.transactionId}-${prng.int(0, 1e9)}`;
  // The same request twice at once with one idempotency key: one refund at most.
  const send = () =>
    fetch(`${options.baseUrl}/api/v1/refunds`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${seller.apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': key,
      },
      body: JSON.stringify({ transactionId: transaction.transactionId, amount, reason: 'chaos' }),
      signal: AbortSignal.timeout(30_000),
    }).then(async (r) => ({ status: r.status, body: (await r.json().catch(() => ({}))) as { id?: string } }));
  options.record.requests += 3;
  const answers = await Promise.all([send(), send()]);
  const created = answers.find((a) => a.status === 201);
  if (created?.body.id) options.record.refundsAccepted.push(created.body.id);
  return created
    ? full
      ? 'full refund accepted'
      : 'partial refund accepted'
    : `refused ${answers.map((a) => a.status).join('/')}`;
}

/** What `/api/verify` answered one presentation (status 0: no answer). */
interface VerifyAnswer {
  status: number;
  body: { valid?: boolean; reason?: string; payment?: { reused?: boolean } };
}

/**
 * A payment verified by a seller's own server (the gateway middleware's `/api/verify`): the agent pays the
 * requirements the seller's middleware would state, and the seller presents the proof, with 0–1 concurrent
 * replays. Only one answer may be a fresh `valid` (a replay of the same proof is `reused`).
 */
async function verify(
  options: LoadOptions,
  agent: ReturnType<typeof createAgent>,
  seller: Seller,
  prng: Prng,
  payer: string,
): Promise<string> {
  const challenge = await fetch(`${options.baseUrl}/api/v1/skills/${seller.skill}/work`, {
    signal: AbortSignal.timeout(15_000),
  });
  options.record.requests++;
  if (challenge.status !== 402) return `challenge ${challenge.status} ${await errorCode(challenge)}`;
  const base = (await challenge.json()) as PaymentRequirements;
  const url = `https://${seller.sellerId.toLowerCase()}.seller.example/report/${prng.int(0, 1e9)}`;
  const requirements: PaymentRequirements = {
    ...base,
    price: `0.0${prng.int(10, 99)}`,
    resource: `GET ${url}`,
    type: 'payPerCall',
  };
  const paid = await agent.pay(url, requirements);
  const replays = prng.int(0, 1);
  for (let round = 0; round < 5; round++) {
    options.record.requests += 1 + replays;
    const answers = await Promise.all(
      Array.from({ length: 1 + replays }, () => askVerify(options, seller, paid.header, requirements)),
    );
    const fresh = answers.filter((a) => a.body.valid === true && a.body.payment?.reused !== true).length;
    if (answers.some((a) => a.body.valid === true)) {
      // Reused only: an earlier round's fresh answer was lost on the way (a 5xx at the balancer): one served.
      recordServed(
        options.record,
        paid.txHash,
        { sellerId: seller.sellerId, amount: paid.amount, payer },
        (countSoFar) => (fresh === 0 && countSoFar === 0 ? 1 : fresh),
      );
      return fresh === 1 ? 'valid' : fresh === 0 ? 'valid (reused only)' : 'valid MORE THAN ONCE';
    }
    const retriable = answers.every((a) => a.status === 0 || a.status >= 500 || a.status === 429);
    if (!retriable) {
      options.record.unserved.push(paid.txHash);
      return `invalid ${answers.map((a) => a.body.reason ?? a.status).join('/')}`;
    }
    await new Promise((r) => setTimeout(r, 1000 * (round + 1)));
  }
  options.record.unserved.push(paid.txHash);
  return 'not verified (gave up)';
}

/** The seller presents the payment proof to `/api/verify` for the price and resource it states. */
function askVerify(
  options: LoadOptions,
  seller: Seller,
  payment: string,
  requirements: PaymentRequirements,
): Promise<VerifyAnswer> {
  return fetch(`${options.baseUrl}/api/verify`, {
    method: 'POST',
    headers: { authorization: `Bearer ${seller.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      payment,
      price: requirements.price,
      type: 'payPerCall',
      resource: requirements.resource,
    }),
    signal: AbortSignal.timeout(10_000),
  })
    .then(async (r) => ({
      status: r.status,
      body: (await r.json().catch(() => ({}))) as VerifyAnswer['body'],
    }))
    .catch(() => ({ status: 0, body: {} }));
}

export type { Seller };
