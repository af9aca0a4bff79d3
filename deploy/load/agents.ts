/**
 * The load run's agents: closed loops, each agent one operation after the other with its own wallet, timed from
 * its first request to its answer. Paygate's operations are the chaos run's (deploy/chaos/load.ts and
 * checkout-load.ts: the same calls, recorded in the same LoadRecord the invariants read) plus MCP tool calls; the
 * reference facilitator's agents settle the same kind of x402 payment (EIP-3009, 0.01 USDC) at the same
 * concurrency as Paygate's x402 agents, on the same chain, at the same time.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createAgent, PAYMENT_HEADER } from '@paygate/agent-client';
import { signTransferAuthorization } from '@paygate/testing';
import type { Wallet } from 'ethers';
import { checkoutByTransfer } from '../chaos/checkout-load';
import { type LoadOptions, type LoadRecord, payment, refund, settleNow } from '../chaos/load';
import type { Seller } from '../chaos/participants';
import type { Prng } from '../chaos/prng';

export type AgentKind =
  | 'x402'
  | 'txHashProof'
  | 'mcp'
  | 'subscriber'
  | 'checkout'
  | 'refund'
  | 'settleNow'
  | 'reference';

export const AGENT_KINDS: readonly AgentKind[] = [
  'x402',
  'txHashProof',
  'mcp',
  'subscriber',
  'checkout',
  'refund',
  'settleNow',
  'reference',
];

/** Every kind's outcomes and the times of those that did what was asked (paid and served, accepted). */
export interface KindRecord {
  outcomes: Record<string, number>;
  okMs: number[];
}

export type AgentRecords = Record<AgentKind, KindRecord>;

export function emptyAgentRecords(): AgentRecords {
  return Object.fromEntries(
    AGENT_KINDS.map((kind): [AgentKind, KindRecord] => [kind, { outcomes: {}, okMs: [] }]),
  ) as AgentRecords;
}

/** Which outcomes count as done: a served paid call, an accepted refund or settle-now, a checkout paid as sent. */
const SUCCEEDED: Record<AgentKind, (outcome: string) => boolean> = {
  x402: (o) => o === 'served',
  txHashProof: (o) => o === 'served',
  mcp: (o) => o === 'served',
  subscriber: (o) => o === 'served',
  checkout: (o) => !/error|timed out|^create |not mined|status \d|never/i.test(o),
  refund: (o) => o.endsWith('refund accepted'),
  settleNow: (o) => o === 'accepted',
  reference: (o) => o === 'settled',
};

/** Every operation is bounded: one stuck on a dropped transaction never holds the run. */
const OPERATION_DEADLINE_MS = 45_000;
/** After an operation that did not succeed: an agent that was refused waits before it tries again. */
const FAILED_PAUSE_MS = 1_000;
/** The operator's pace: a refund or a settle-now every couple of seconds per agent, not a tight loop. */
const OPERATOR_PAUSE_MS = 2_000;
/** A subscriber's calls on one subscription before it buys the next (each buys one more transfer to check). */
const CALLS_PER_SUBSCRIPTION = 20;
/** Paid 0.01 USDC through the reference: Paygate's minimum relayed payment, as bench/x402 pays it. */
const REFERENCE_AMOUNT_MICRO = 10_000n;

export interface AgentSetup {
  load: LoadOptions;
  record: LoadRecord;
  agents: AgentRecords;
  prng: Prng;
  chainId: number;
  counts: Record<AgentKind, number>;
  /** The subscription skill's paid URL (a skill of type Subscription, 30 days). */
  subscriptionUrl: string;
  subscriptionSeller: Seller;
  /** Wallets with ETH and USDC, one per paying agent (taken in order). */
  wallets: Wallet[];
  shouldStop: () => boolean;
}

function withDeadline(operation: Promise<string>): Promise<string> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    operation,
    new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve('timed out (45 s)'), OPERATION_DEADLINE_MS);
    }),
  ]).finally(() => clearTimeout(timer));
}

function loop(
  setup: AgentSetup,
  kind: AgentKind,
  pauseMs: number,
  operation: () => Promise<string>,
): Promise<void> {
  return loopInto(setup.agents[kind], kind, pauseMs, operation, setup.shouldStop);
}

async function loopInto(
  into: KindRecord,
  kind: AgentKind,
  pauseMs: number,
  operation: () => Promise<string>,
  shouldStop: () => boolean,
): Promise<void> {
  while (!shouldStop()) {
    const started = performance.now();
    let outcome: string;
    try {
      outcome = await withDeadline(operation());
    } catch (error) {
      outcome = `error: ${(error as Error).message.slice(0, 80)}`;
    }
    into.outcomes[outcome] = (into.outcomes[outcome] ?? 0) + 1;
    const ok = SUCCEEDED[kind](outcome);
    if (ok) into.okMs.push(performance.now() - started);
    // A refusal answered at once must not become a tight loop (a run's x402 payers asked 23,920 times in 300 s).
    const pause = Math.max(pauseMs, ok ? 0 : FAILED_PAUSE_MS);
    if (pause > 0) await new Promise((r) => setTimeout(r, pause));
  }
}

/** An MCP tool call paid through the agent client (x402 over MCP, relayed): a served call is recorded once. */
async function mcpCall(
  setup: AgentSetup,
  client: Client,
  agent: ReturnType<typeof createAgent>,
  seller: Seller,
  tool: string,
): Promise<string> {
  setup.record.requests += 2;
  const result = await agent.callTool(client as never, { name: tool, arguments: {} });
  const response = (result._meta as Record<string, unknown> | undefined)?.['x402/payment-response'] as
    | { success?: boolean; transaction?: string; errorReason?: string }
    | undefined;
  if (response?.success === true && response.transaction) {
    const entry = setup.record.served.get(response.transaction) ?? {
      count: 0,
      sellerId: seller.sellerId,
      amount: '',
    };
    entry.count += 1;
    setup.record.served.set(response.transaction, entry);
    setup.record.successTimes.push(Date.now());
    return 'served';
  }
  return `not served ${response?.errorReason ?? JSON.stringify(result).slice(0, 60)}`;
}

/**
 * A subscriber's next call: a new subscription paid by a USDC transfer (Paygate's tx-hash proof) every
 * CALLS_PER_SUBSCRIPTION calls, and its proof presented again for the calls in between, as a subscriber does.
 * The transfer is recorded served once (the invariants count transfers, not the calls a subscription covers).
 */
function subscriber(setup: AgentSetup, agent: ReturnType<typeof createAgent>, payer: string) {
  let current: { header: string; callsLeft: number } | undefined;
  return async (): Promise<string> => {
    const url = setup.subscriptionUrl;
    if (!current || current.callsLeft <= 0) {
      const challenge = await fetch(url, { signal: AbortSignal.timeout(15_000) });
      setup.record.requests++;
      if (challenge.status !== 402) return `challenge ${challenge.status}`;
      const paid = await agent.pay(url, (await challenge.json()) as never);
      setup.record.served.set(paid.txHash, {
        count: 1,
        sellerId: setup.subscriptionSeller.sellerId,
        amount: paid.amount,
        payer,
      });
      current = { header: paid.header, callsLeft: CALLS_PER_SUBSCRIPTION };
    }
    current.callsLeft--;
    setup.record.requests++;
    const response = await fetch(url, {
      headers: { [PAYMENT_HEADER]: current.header },
      signal: AbortSignal.timeout(15_000),
    });
    const body = await response.text();
    if (response.status === 200) return 'served';
    // Not confirmed yet: the same proof is presented again on the next call.
    if (/confirm/i.test(body)) current.callsLeft++;
    return `status ${response.status} ${body.slice(0, 60)}`;
  };
}

/** The reference facilitator and the payment its payers make. */
export interface ReferenceTarget {
  url: string;
  payTo: string;
  usdcAddress: string;
  chainId: number;
}

/** A fresh, well-signed x402 payment settled by the reference facilitator. */
async function referenceSettle(target: ReferenceTarget, buyer: Wallet): Promise<string> {
  const { usdcAddress } = target;
  const signed = await signTransferAuthorization(buyer, {
    chainId: target.chainId,
    usdcAddress,
    to: target.payTo,
    valueMicro: REFERENCE_AMOUNT_MICRO,
  });
  const requirements = {
    scheme: 'exact',
    network: `eip155:${target.chainId}`,
    asset: usdcAddress,
    payTo: target.payTo,
    amount: String(REFERENCE_AMOUNT_MICRO),
    maxTimeoutSeconds: 60,
    extra: { name: 'USD Coin', version: '2' },
  };
  const response = await fetch(`${target.url}/settle`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      x402Version: 2,
      paymentPayload: {
        x402Version: 2,
        resource: { url: 'https://seller.example/load', description: 'load', mimeType: 'application/json' },
        accepted: requirements,
        payload: signed,
      },
      paymentRequirements: requirements,
    }),
    signal: AbortSignal.timeout(40_000),
  });
  const answer = (await response.json().catch(() => ({}))) as { success?: boolean; errorReason?: string };
  return response.status === 200 && answer.success
    ? 'settled'
    : `status ${response.status} ${answer.errorReason ?? ''}`.trim();
}

/** The reference facilitator's payers (deploy/load/reference-process.ts), one closed loop each. */
export async function runReferencePayers(input: {
  into: KindRecord;
  target: ReferenceTarget;
  payers: Wallet[];
  shouldStop: () => boolean;
}): Promise<void> {
  await Promise.all(
    input.payers.map((payer) =>
      loopInto(input.into, 'reference', 0, () => referenceSettle(input.target, payer), input.shouldStop),
    ),
  );
}

/** Paygate's x402 payers (deploy/load/x402-process.ts), one closed loop each: payer i pays with `pay(payer, i)`. */
export async function runX402Payers(input: {
  into: KindRecord;
  payers: Wallet[];
  pay: (payer: Wallet, i: number) => Promise<string>;
  shouldStop: () => boolean;
}): Promise<void> {
  await Promise.all(
    input.payers.map((payer, i) =>
      loopInto(input.into, 'x402', 0, () => input.pay(payer, i), input.shouldStop),
    ),
  );
}

/** Starts every agent of Paygate but the x402 payers (those and the reference's run apart, each in their own process) and resolves when all have stopped (setup.shouldStop, each after its operation in flight). */
export async function runAgents(setup: AgentSetup): Promise<void> {
  const { load, prng, counts, wallets } = setup;
  let nextWallet = 0;
  const wallet = () => {
    const taken = wallets[nextWallet++];
    if (!taken) throw new Error('fewer funded wallets than paying agents');
    return taken;
  };
  const sellerFor = (i: number) => load.sellers[i % load.sellers.length]!;
  const loops: Array<Promise<void>> = [];

  // The x402 payers' wallets are the first ones (deploy/load/x402-process.ts pays with them).
  nextWallet += counts.x402;
  for (let i = 0; i < counts.txHashProof; i++) {
    const buyer = wallet();
    const agent = createAgent({ wallet: buyer, maxPricePerCall: '1', confirmationTimeoutMs: 20_000 });
    const own = prng.fork(`proof-${i}`);
    loops.push(
      loop(setup, 'txHashProof', 0, () =>
        payment(load, agent, sellerFor(i), own, buyer.address.toLowerCase()),
      ),
    );
  }
  if (counts.mcp > 0) {
    const tools = await mcpTools(load.baseUrl);
    for (let i = 0; i < counts.mcp; i++) {
      const buyer = wallet();
      const seller = sellerFor(i);
      const tool = tools.find((name) => name.startsWith(`${seller.skill}__`));
      if (!tool) throw new Error(`the gateway's MCP catalog has no tool of ${seller.skill}`);
      const client = new Client({ name: `load-agent-${i}`, version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${load.baseUrl}/api/v1/mcp`)));
      const agent = createAgent({ wallet: buyer, maxPricePerCall: '1' });
      loops.push(
        loop(setup, 'mcp', 0, () => mcpCall(setup, client, agent, seller, tool)).finally(() =>
          client.close().catch(() => undefined),
        ),
      );
    }
  }
  for (let i = 0; i < counts.subscriber; i++) {
    const buyer = wallet();
    const agent = createAgent({ wallet: buyer, maxPricePerCall: '1', confirmationTimeoutMs: 20_000 });
    loops.push(loop(setup, 'subscriber', 0, subscriber(setup, agent, buyer.address.toLowerCase())));
  }
  for (let i = 0; i < counts.checkout; i++) {
    const buyer = wallet();
    const own = prng.fork(`checkout-${i}`);
    // A seller drawn for each session: the sessions of both matching modes get paid (by amount, by deposit address).
    loops.push(
      loop(setup, 'checkout', 0, () => checkoutByTransfer(load, buyer, own.pick(load.sellers), own)),
    );
  }
  for (let i = 0; i < counts.refund; i++) {
    const own = prng.fork(`refund-${i}`);
    loops.push(loop(setup, 'refund', OPERATOR_PAUSE_MS, () => refund(load, sellerFor(i), own)));
  }
  for (let i = 0; i < counts.settleNow; i++) {
    loops.push(loop(setup, 'settleNow', OPERATOR_PAUSE_MS, () => settleNow(load, sellerFor(i))));
  }
  await Promise.all(loops);
}

/** The tool names of the gateway's MCP catalog (one per active endpoint). */
async function mcpTools(baseUrl: string): Promise<string[]> {
  const client = new Client({ name: 'load-catalog', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/api/v1/mcp`)));
  try {
    const { tools } = await client.listTools();
    return tools.map((tool) => tool.name);
  } finally {
    await client.close();
  }
}

/** Paying agents: those that need a wallet of their own. */
export function payingAgents(counts: Record<AgentKind, number>): number {
  return (
    counts.x402 + counts.reference + counts.txHashProof + counts.mcp + counts.subscriber + counts.checkout
  );
}
