/**
 * The load's paid calls that their seller fails (the failing skill of participants.ts: a 500, no answer, the
 * connection dropped), paid three ways: the unmodified `@x402/fetch` (under x402's payment-identifier), an agent
 * through the gateway's MCP endpoint (`@paygate/agent-client`'s callTool), and a tx-hash payment. Each purchase is
 * presented twice (the same payment identifier, or the same proof): a failed call may be retried within its window
 * and is charged once. Every charged one is recorded: invariant 12 checks its USDC came back to its payer on chain,
 * exactly once, after its window.
 */
import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  type createAgent,
  PAYMENT_HEADER,
  type PaymentRequirements,
  RECEIPT_HEADER,
} from '@paygate/agent-client';
import { ExactEvmScheme } from '@x402/evm';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import type { Wallet } from 'ethers';
import { privateKeyToAccount } from 'viem/accounts';
import type { LoadOptions } from './load';
import { errorCode, FAILING_PATHS, failingTool, type Seller, type SellerFailureKind } from './participants';
import type { Prng } from './prng';

export type FailingChannel = 'x402' | 'mcp' | 'txHash';

/** A paid call its seller failed, as the buyer saw it: what paid it and who, both presentations' answers. */
export interface FailingCall {
  txHash: string;
  payer: string;
  sellerId: string;
  channel: FailingChannel;
  failure: SellerFailureKind;
  /** The transaction the second presentation named, when it differs from the first (charged twice). */
  secondTxHash?: string;
}

/** How often each failure is drawn: a 500 half of the time, no answer and a dropped connection a quarter each. */
const FAILURE_WEIGHTS: Record<SellerFailureKind, number> = {
  status500: 2,
  timeout: 1,
  connectionDropped: 1,
};

const failingUrl = (options: LoadOptions, seller: Seller, failure: SellerFailureKind) =>
  `${options.baseUrl}/api/v1/skills/${seller.failingSkill}${FAILING_PATHS[failure]}`;

const newPaymentId = () => `pay_${randomUUID().replace(/-/g, '')}`;

/** Recorded once charged (before the retry, so an operation cut by its deadline is still checked). */
function recordFailing(options: LoadOptions, call: FailingCall): FailingCall {
  options.record.failing.push(call);
  return call;
}

/** The retry's transaction, and the outcome counted for the report: both answers, charged once or twice. */
function retried(call: FailingCall, secondTxHash: string | undefined, answers: string): string {
  if (secondTxHash && secondTxHash !== call.txHash) call.secondTxHash = secondTxHash;
  return `${call.failure} ${answers}, ${call.secondTxHash ? 'CHARGED TWICE' : 'charged once'}`;
}

/** `@x402/fetch` pays the failing route, and presents the same purchase again under its payment identifier. */
export async function failingX402(
  options: LoadOptions,
  buyer: Wallet,
  seller: Seller,
  prng: Prng,
): Promise<string> {
  const failure = prng.weighted(FAILURE_WEIGHTS);
  const url = failingUrl(options, seller, failure);
  const challenge = await fetch(url, { signal: AbortSignal.timeout(15_000) });
  options.record.requests++;
  const required = challenge.headers.get('payment-required');
  if (challenge.status !== 402 || !required)
    return `challenge ${challenge.status} ${await errorCode(challenge)}`;
  const accepts = JSON.parse(Buffer.from(required, 'base64').toString('utf8')).accepts[0];
  const pay = payingWithId(buyer, accepts, newPaymentId());
  // Each presentation is the 402 again, then the paid request.
  options.record.requests += 2;
  const first = await pay(url, { signal: AbortSignal.timeout(40_000) });
  const txHash = first.headers.get(RECEIPT_HEADER)?.toLowerCase();
  if (!txHash) return `${failure} ${first.status} ${await errorCode(first)}, no charge named`.trim();
  if (first.status === 200) return `${failure} SERVED by a failing route`;
  const call = recordFailing(options, {
    txHash,
    payer: buyer.address.toLowerCase(),
    sellerId: seller.sellerId,
    channel: 'x402',
    failure,
  });
  options.record.requests += 2;
  const again = await pay(url, { signal: AbortSignal.timeout(40_000) }).catch(() => undefined);
  return retried(
    call,
    again?.headers.get(RECEIPT_HEADER)?.toLowerCase(),
    `${first.status}/${again?.status ?? 0}`,
  );
}

/**
 * The unmodified `@x402/fetch`, every payment it makes under one payment identifier (what
 * `@x402/extensions`' appendPaymentIdentifierToExtensions does: the id into the extension the 402 declared). The
 * local test USDC is allowed explicitly, capped at 0.10 USDC per payment.
 */
function payingWithId(
  buyer: Wallet,
  accepts: { network: `${string}:${string}`; asset: string },
  paymentId: string,
) {
  const client = x402Client.fromConfig({
    schemes: [
      {
        network: accepts.network,
        client: new ExactEvmScheme(privateKeyToAccount(buyer.privateKey as `0x${string}`)),
      },
    ],
    spendControls: {
      allowedAssets: [{ network: accepts.network, asset: accepts.asset, maxAmountPerPayment: '100000' }],
    },
  });
  client.onBeforePaymentCreation(async ({ paymentRequired }) => {
    const declared = paymentRequired.extensions?.['payment-identifier'] as
      | { info: { id?: string } }
      | undefined;
    if (declared) declared.info.id = paymentId;
  });
  return wrapFetchWithPayment(fetch, client);
}

/** An agent calls the failing route's MCP tool and pays it, then calls it again under the same payment id. */
export async function failingMcp(
  options: LoadOptions,
  agent: ReturnType<typeof createAgent>,
  buyer: Wallet,
  seller: Seller,
  prng: Prng,
): Promise<string> {
  const failure = prng.weighted(FAILURE_WEIGHTS);
  const client = new Client({ name: 'chaos-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${options.baseUrl}/api/v1/mcp`)));
  try {
    const call = { name: failingTool(seller, failure) };
    const paymentId = newPaymentId();
    // The tool call unpaid, then paid (initialize counted with the first).
    options.record.requests += 3;
    const first = await agent.callTool(client, call, { paymentId });
    const txHash = settledTransaction(first);
    if (!txHash) return `${failure} ${first.isError ? 'error' : 'result'}, no charge named`;
    if (!first.isError) return `${failure} SERVED by a failing tool`;
    const failing = recordFailing(options, {
      txHash,
      payer: buyer.address.toLowerCase(),
      sellerId: seller.sellerId,
      channel: 'mcp',
      failure,
    });
    options.record.requests += 2;
    const again = await agent.callTool(client, call, { paymentId }).catch(() => undefined);
    return retried(
      failing,
      again ? settledTransaction(again) : undefined,
      `tool error/${again ? (again.isError ? 'tool error' : 'result') : 'no answer'}`,
    );
  } finally {
    await client.close().catch(() => undefined);
  }
}

/** The transaction of an MCP tool call's settlement (`_meta['x402/payment-response']`). */
function settledTransaction(result: Record<string, unknown>): string | undefined {
  const meta = result._meta as Record<string, { success?: boolean; transaction?: string }> | undefined;
  const response = meta?.['x402/payment-response'];
  return response?.success === true && typeof response.transaction === 'string'
    ? response.transaction.toLowerCase()
    : undefined;
}

/**
 * A tx-hash payment (Paygate's agent: the 402, a USDC transfer, the proof) of the failing route, presented until the
 * gateway claims it (bounded: no replica, or not confirmed yet, is presented again), then once more as a retry.
 */
export async function failingPayment(
  options: LoadOptions,
  agent: ReturnType<typeof createAgent>,
  buyer: Wallet,
  seller: Seller,
  prng: Prng,
): Promise<string> {
  const failure = prng.weighted(FAILURE_WEIGHTS);
  const url = failingUrl(options, seller, failure);
  const challenge = await fetch(url, { signal: AbortSignal.timeout(15_000) });
  options.record.requests++;
  if (challenge.status !== 402) return `challenge ${challenge.status} ${await errorCode(challenge)}`;
  const paid = await agent.pay(url, (await challenge.json()) as PaymentRequirements);
  const txHash = paid.txHash.toLowerCase();
  const present = () => {
    options.record.requests++;
    return fetch(url, { headers: { [PAYMENT_HEADER]: paid.header }, signal: AbortSignal.timeout(15_000) })
      .then(async (r) => ({ status: r.status, receipt: r.headers.get(RECEIPT_HEADER), body: await r.text() }))
      .catch(() => ({ status: 0, receipt: null, body: '' }));
  };
  let first = await present();
  for (let round = 1; round < 5 && !first.receipt; round++) {
    if (!(first.status === 0 || first.status === 503 || /not_confirmed|confirm/i.test(first.body))) break;
    await new Promise((r) => setTimeout(r, 1000 * round));
    first = await present();
  }
  if (first.status === 200) return `${failure} SERVED by a failing route`;
  // Never claimed: the transfer is escrow money no payment names, which invariant 3 reads and the operator sends
  // back (unmatched transfers); not an unserved call.
  if (!first.receipt) return `${failure} ${first.status}, never claimed`;
  const call = recordFailing(options, {
    txHash,
    payer: buyer.address.toLowerCase(),
    sellerId: seller.sellerId,
    channel: 'txHash',
    failure,
  });
  const again = await present();
  return retried(call, again.receipt?.toLowerCase() ?? undefined, `${first.status}/${again.status}`);
}
