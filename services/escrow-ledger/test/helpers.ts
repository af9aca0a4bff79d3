import { randomBytes } from 'node:crypto';
import { type Bus, requestRpc } from '@paygate/bus';
import type { EventData, RpcReply, RpcRequest, Subject } from '@paygate/contracts';
import {
  eventDataOf,
  eventOf,
  publishEvent,
  type ServiceHarness,
  serveSellersForTests,
  startServiceHarness,
  TestClock,
  testWallets,
} from '@paygate/testing';
import { loadConfig, type RunningEscrowLedger, startEscrowLedger } from '../src';
import type { LedgerTrx } from '../src/db';
import type { LedgerDeps } from '../src/deps';
import { LedgerInvariantError } from '../src/errors';
import { newTransactionId } from '../src/ids';
import {
  bookPayments,
  type ClaimedBooking,
  type ClaimedPayment,
  paymentConfirmedEvent,
  paymentToBook,
} from '../src/payments/confirmed';
import { reportConflict } from '../src/payments/conflicts';

/** The first contract anvil's deployer creates (deployTestUsdc); the config requires a USDC address. */
const PLACEHOLDER_USDC_ADDRESS = '0x5FbDB2315678afecb367f032d93F642f64180aa3';

export const OPERATOR_TOKEN = 'test-operator-token-123456';
export const SELLER_KEY = 'sk_test_seller_key_0123456789';
export const OTHER_SELLER_KEY = 'sk_test_other_key_0123456789';

/**
 * libs/testing's service harness running the ledger (`service`, also `ledger`) without a chain, on a clock that
 * stands still, with two sellers the registry's key resolution knows (SELLER_KEY, OTHER_SELLER_KEY).
 */
export interface LedgerHarness extends ServiceHarness<RunningEscrowLedger> {
  bus: Bus;
  ledger: RunningEscrowLedger;
  sellerId: string;
  otherSellerId: string;
  /**
   * Publishes an event to the ledger's stream, its producer the subject's owner. `payment.confirmed` is not an
   * instruction to the ledger: a payment given as one is sent as the command that books it (`claim`), as the
   * gateway or checkout would.
   */
  publish<S extends Subject>(
    type: S,
    data: EventData<S>,
    options?: { id?: string; msgId?: string },
  ): Promise<string>;
  /** `ledger.claim_transfer` booking the payment, as the gateway (x402) or checkout (a session) asks it. */
  claim(
    payment: EventData<'payment.confirmed'>,
    options?: { reference?: string },
  ): Promise<RpcReply<'ledger.claim_transfer'>>;
  http(
    path: string,
    init?: { method?: string; body?: unknown; key?: string | null; headers?: Record<string, string> },
  ): Promise<{ status: number; body: any; headers: Headers }>;
}

export async function startLedgerHarness(
  label: string,
  extraEnv: Record<string, string> = {},
  databaseSettings: Record<string, string> = {},
): Promise<LedgerHarness> {
  const sellerId = `sel_${randomBytes(4).toString('hex')}`;
  const otherSellerId = `sel_${randomBytes(4).toString('hex')}`;
  const identity = (id: string) => ({
    sellerId: id,
    walletAddress: '0x90F79bf6EB2c4f870365E785982E1f101E93b906',
    payoutAddress: '0x90F79bf6EB2c4f870365E785982E1f101E93b906',
    publishableKey: `pk_test_${id}_0123456789`,
    apiKeyVersion: 1,
  });
  let started: { bus: Bus } | undefined;
  const harness = await startServiceHarness(
    label,
    async ({ env, clock, onStop }) => {
      const bus = await env.bus();
      started = { bus };
      const responder = await serveSellersForTests(bus, {
        [SELLER_KEY]: identity(sellerId),
        [OTHER_SELLER_KEY]: identity(otherSellerId),
      });
      onStop(() => responder.stop());
      return startEscrowLedger({
        ...loadConfig(
          env.envFor('escrow-ledger', {
            OPERATOR_TOKEN,
            RELEASE_INTERVAL_MS: '600000',
            // Only reconciliation reads the chain, and these suites have none: a port nothing listens on, so a
            // local chain left running on the default 8545 (a dev stack) cannot answer for it.
            CHAIN_RPC_URL: 'http://127.0.0.1:9',
            USDC_ADDRESS: PLACEHOLDER_USDC_ADDRESS,
            ESCROW_ADDRESS: testWallets.escrow.address,
            // Suites send many refund requests from one address; the limit has a suite of its own.
            REFUND_REQUESTS_PER_MINUTE: '100000',
            // Likewise many refunds of one seller (its limit: refund-dust.test.ts).
            REFUNDS_PER_MINUTE: '100000',
            // Without a chain nothing confirms a payment's transfer: not held back for it here (the hold-back and
            // the receipt check have their suite, chain-confirmation.test.ts, with a chain).
            CHAIN_CONFIRM_TIMEOUT_MS: '0',
            // The clock stands still: a 0 h hold is due at once here (the call outcome window has its test in
            // unserved-refunds.test.ts).
            CALL_OUTCOME_WINDOW_MS: '0',
            ...extraEnv,
          }),
        ),
        now: clock.now,
      });
    },
    { clock: new TestClock('2026-12-01T10:00:00.000Z'), databaseSettings },
  );
  const { bus } = started!;
  const ledger = harness.service;
  const claim: LedgerHarness['claim'] = (payment, options = {}) =>
    requestRpc(bus, 'ledger.claim_transfer', claimRequestOf(payment, options.reference), {
      timeoutMs: 15_000,
    });
  return {
    ...harness,
    bus: bus,
    ledger,
    sellerId,
    otherSellerId,
    async publish(type, data, options = {}) {
      if (type === 'payment.confirmed') {
        await claim(data as EventData<'payment.confirmed'>);
        return options.id ?? `claim:${(data as EventData<'payment.confirmed'>).paymentId}`;
      }
      return publishEvent(bus, eventOf(type, data, options.id ? { id: options.id } : {}), options);
    },
    claim,
    async http(path, init = {}) {
      const headers: Record<string, string> = { 'content-type': 'application/json', ...(init.headers ?? {}) };
      const key = init.key === undefined ? SELLER_KEY : init.key;
      if (key) headers.authorization = `Bearer ${key}`;
      const response = await fetch(`${ledger.url}${path}`, {
        method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
        headers,
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        signal: AbortSignal.timeout(10_000),
      });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : null, headers: response.headers };
    },
  };
}

/** The claim that books a payment: the gateway's (x402, per transaction) or checkout's (per session). */
export function claimRequestOf(
  payment: EventData<'payment.confirmed'>,
  reference?: string,
): RpcRequest<'ledger.claim_transfer'> {
  const { paymentId, source, sellerId, skillId, skillName, endpointId, sessionId, network, token } = payment;
  return {
    chainId: payment.chainId,
    txHash: payment.txHash,
    logIndex: payment.logIndex,
    claimedVia: source === 'checkout' ? 'checkout' : 'x402',
    reference:
      reference ??
      (source === 'checkout' ? (sessionId ?? paymentId) : `${network}:${payment.txHash.toLowerCase()}`),
    payer: payment.payer,
    amount: payment.amount,
    payment: {
      paymentId,
      source,
      sellerId,
      skillId,
      skillName,
      endpointId,
      sessionId,
      network,
      token,
      holdPeriodHours: payment.holdPeriodHours,
    },
  };
}

/** A payment as the ledger's booking reads it from its claim (bookClaimedPayments), for suites that book directly. */
export function claimedPaymentOf(payment: EventData<'payment.confirmed'>): ClaimedPayment {
  const request = claimRequestOf(payment);
  return { request: { ...request, claimedVia: request.claimedVia! }, payment: request.payment! };
}

/**
 * Books claimed payments in the caller's transaction through book_payments, for suites that book without a claim:
 * each amount from suspense into the 95/5 holds with its `payment.confirmed`, or a conflict where the books
 * disagree. One outcome per claim, in order.
 */
export async function bookClaimedPayments(
  trx: LedgerTrx,
  claimed: ClaimedPayment[],
  deps: LedgerDeps,
): Promise<ClaimedBooking[]> {
  if (claimed.length === 0) return [];
  const now = deps.now();
  const payments = claimed.map((item) => {
    const payment = paymentToBook(item, newTransactionId(), now, deps.config.callOutcomeWindowMs);
    return { ...payment, confirmedEvent: paymentConfirmedEvent(payment) };
  });
  // Transfers are locked in one order (chain, hash, log) in every batch, so two batches cannot wait on each other
  // crosswise (the claims statement inserted them in that order too).
  const order = (p: (typeof payments)[number]) => `${p.chainId}:${p.txHash}:${p.logIndex}`;
  const sorted = [...payments].sort((a, b) => (order(a) < order(b) ? -1 : order(a) > order(b) ? 1 : 0));
  const outcomes = await bookPayments(trx, sorted, now);
  // A booked payment's row names its own transaction; the rest are found by payment id.
  const bookedIds = new Set(
    outcomes.filter((row) => row.outcome === 'booked').map((row) => row.transaction_id),
  );
  const others = new Map(
    outcomes.filter((row) => row.outcome !== 'booked').map((row) => [row.payment_id, row]),
  );
  return claimed.map((item, i): ClaimedBooking => {
    const own = payments[i]!.transactionId;
    if (bookedIds.has(own)) return { transactionId: own, outcome: 'booked' };
    const row = others.get(item.payment.paymentId);
    if (!row)
      throw new LedgerInvariantError(`book_payments returned nothing for payment ${item.payment.paymentId}`);
    if (row.outcome === 'conflict') {
      reportConflict(deps, row.conflict_kind, {
        paymentId: row.payment_id,
        existingTransactionId: row.existing_transaction_id,
      });
    }
    return { transactionId: row.outcome === 'duplicate' ? row.transaction_id : null, outcome: row.outcome };
  });
}

export function randomTxHash(): string {
  return `0x${randomBytes(32).toString('hex')}`;
}

let paymentCounter = 0;
/** A payment.confirmed of `sellerId` over the contract's sample: an x402 payment of 10 USDC on anvil, held 24 h. */
export function paymentData(
  sellerId: string,
  overrides: Partial<EventData<'payment.confirmed'>> = {},
): EventData<'payment.confirmed'> {
  paymentCounter += 1;
  return eventDataOf('payment.confirmed', {
    paymentId: `pay_${randomBytes(6).toString('hex')}_${paymentCounter}`,
    source: 'x402',
    sellerId,
    skillId: 'skl_1',
    skillName: 'weather',
    endpointId: null,
    sessionId: null,
    payer: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
    amount: '10',
    network: 'local',
    chainId: 31337,
    token: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
    txHash: randomTxHash(),
    logIndex: 0,
    holdPeriodHours: 24,
    confirmedAt: new Date().toISOString(),
    ...overrides,
  });
}

/** The chain-indexer's transfer.observed of the payment's transfer into escrow (`amount` if it differs). */
export function observedData(
  payment: EventData<'payment.confirmed'>,
  amount = payment.amount,
): EventData<'transfer.observed'> {
  return eventDataOf('transfer.observed', {
    chainId: payment.chainId,
    network: payment.network,
    txHash: payment.txHash,
    logIndex: payment.logIndex,
    blockNumber: 10,
    blockHash: randomTxHash(),
    from: payment.payer,
    to: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
    token: payment.token,
    amount,
    confirmations: 2,
    observedAt: new Date().toISOString(),
  });
}
