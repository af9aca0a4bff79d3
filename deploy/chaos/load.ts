/**
 * The run's load: sellers with a paid API skill (0 h hold), buyers with their own wallets (one worker each, so
 * nonces never race), and a seeded mix of operations sent through the balancer while faults happen:
 *
 * - `payment`: a tx-hash 402 payment: the 402, a USDC transfer on chain, then the paid call with the proof and
 *   0–2 concurrent replays of the same proof; at most one of them may be served. A call that met no replica is
 *   presented again (bounded), as an agent would.
 * - `x402`: an x402 payment with the standard client (EIP-3009 authorization, relayed gasless by settlement).
 * - `settleNow`: the operator's settle-now for one seller.
 * - `refund`: a seller refund (full or partial) of one of its paid transactions.
 *
 * Every acknowledged outcome is recorded for the invariants: which transfers were served, which refunds and
 * settlements were accepted.
 */
import {
  createAgent,
  PAYMENT_HEADER,
  type PaymentRequirements,
  refundRequestMessage,
} from '@paygate/agent-client';
import { usdcAbi } from '@paygate/chain';
import { createSession, getSession } from '@paygate/checkout-widget/api';
import { parseUsdc } from '@paygate/money';
import { createActiveSkill, signUpSeller, testWallets } from '@paygate/testing';
import { Contract, Interface, JsonRpcProvider, NonceManager, Wallet } from 'ethers';
import type { Prng } from './prng';
import { payWithX402 } from './x402-payment';

export type OperationKind =
  | 'payment'
  | 'x402'
  | 'verify'
  | 'checkoutTransfer'
  | 'checkoutWallet'
  | 'unmatchedTransfer'
  | 'refundRequest'
  | 'settleNow'
  | 'refund';

export interface Seller {
  sellerId: string;
  /** Replaced mid-run by a key rotation (the old key keeps working for its overlap). */
  apiKey: string;
  publishableKey: string;
  sessionToken: string;
  skill: string;
  wallet: Wallet;
}

export interface LoadRecord {
  operations: Record<string, Record<string, number>>;
  /** tx hash → number of 200 answers it bought (must be ≤ 1) and the seller it paid. */
  /** (`payer`: set for payments whose transaction is the buyer's own USDC transfer: what a refund request names.) */
  served: Map<string, { count: number; sellerId: string; amount: string; payer?: string }>;
  /** Transfers sent whose call was never served (the money is in escrow, unclaimed or claimed and failed). */
  unserved: string[];
  refundsAccepted: string[];
  /** Checkout sessions whose payment was mined: a widget that reconnects must see each of them paid. */
  checkoutPaid: Array<{ sessionId: string; txHash: string }>;
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
    checkoutPaid: [],
    accountChanges: [],
    successTimes: [],
    requests: 0,
  };
}

function count(record: LoadRecord, kind: string, outcome: string): void {
  record.operations[kind] ??= {};
  record.operations[kind]![outcome] = (record.operations[kind]![outcome] ?? 0) + 1;
}

export async function setUpSellers(options: {
  baseUrl: string;
  count: number;
  upstreamUrl: string;
  webhookUrl: string;
  prng: Prng;
}): Promise<Seller[]> {
  // Signed up side by side (each waits for its skill's validation).
  return Promise.all(
    Array.from({ length: options.count }, async (_, i): Promise<Seller> => {
      const wallet = Wallet.createRandom() as unknown as Wallet;
      const signed = await signUpSeller(options.baseUrl, wallet);
      const skill = `chaos-api-${i}-${signed.sellerId.slice(-6).toLowerCase()}`;
      await createActiveSkill(
        options.baseUrl,
        signed.apiKey,
        {
          name: skill,
          type: 'API',
          apiBaseUrl: options.upstreamUrl,
          holdPeriodHours: 0,
          endpoints: [
            {
              path: '/work',
              method: 'GET',
              priceUsdc: `0.0${options.prng.int(10, 99)}`,
              description: 'work',
            },
          ],
        } as Parameters<typeof createActiveSkill>[2],
        { timeoutMs: 60_000 },
      );
      const account = await fetch(`${options.baseUrl}/api/v1/account`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${signed.sessionToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ webhookUrl: options.webhookUrl, minimumSettlement: '0.001' }),
        signal: AbortSignal.timeout(10_000),
      });
      if (!account.ok) throw new Error(`seller settings: ${account.status} ${await account.text()}`);
      return {
        sellerId: signed.sellerId,
        apiKey: signed.apiKey,
        publishableKey: signed.publishableKey,
        sessionToken: signed.sessionToken,
        skill,
        wallet,
      };
    }),
  );
}

/** Buyer wallets with ETH (anvil_setBalance) and USDC minted by the test USDC's owner. */
export async function fundBuyers(rpcUrl: string, usdcAddress: string, n: number): Promise<Wallet[]> {
  const provider = new JsonRpcProvider(rpcUrl, undefined, { staticNetwork: true, pollingInterval: 100 });
  const deployer = new NonceManager(new Wallet(testWallets.deployer.privateKey, provider));
  const usdc = new Contract(usdcAddress, usdcAbi, deployer);
  const buyers = Array.from(
    { length: n },
    () => Wallet.createRandom().connect(provider) as unknown as Wallet,
  );
  // Every mint sent at once (the nonce manager numbers them), then all awaited: one block, not one per buyer.
  const mints = [];
  for (const wallet of buyers) {
    await provider.send('anvil_setBalance', [wallet.address, '0x56BC75E2D63100000']);
    mints.push(await usdc.getFunction('mint')(wallet.address, 1_000_000_000n));
  }
  await Promise.all(mints.map((tx) => tx.wait(1, 30_000)));
  // The funding must be final before any reorg (depth ≤ 3) can happen: 5 blocks on top of it.
  const funded = await provider.getBlockNumber();
  const deadline = Date.now() + 60_000;
  while ((await provider.getBlockNumber()) < funded + 5 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 500));
  }
  // (the provider stays: the buyers' wallets send their payments through it)
  return buyers;
}

export interface LoadOptions {
  baseUrl: string;
  usdcAddress: string;
  escrowAddress: string;
  checkoutEscrowAddress: string;
  operatorToken: string;
  sellers: Seller[];
  buyers: Wallet[];
  prng: Prng;
  operations: number;
  /** Pause between one worker's operations (the rate the two cores carry). */
  pauseMs: number;
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

const WEIGHTS: Record<OperationKind, number> = {
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
  const workers = options.buyers.map(async (buyer, w) => {
    const prng = options.prng.fork(`worker-${w}`);
    const agent = createAgent({ wallet: buyer, maxPricePerCall: '1', confirmationTimeoutMs: 20_000 });
    while (issued < options.operations && !options.shouldStop()) {
      issued++;
      const kind = prng.weighted(WEIGHTS);
      const seller = prng.pick(options.sellers);
      let outcome: string;
      try {
        const operations: Record<OperationKind, () => Promise<string>> = {
          payment: () => payment(options, agent, seller, prng, buyer.address.toLowerCase()),
          x402: () => x402(options, buyer, seller),
          verify: () => verify(options, agent, seller, prng, buyer.address.toLowerCase()),
          checkoutTransfer: () => checkoutByTransfer(options, buyer, seller),
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
  await Promise.all(workers);
}

async function payment(
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
      const entry = options.record.served.get(paid.txHash) ?? {
        count: 0,
        sellerId: seller.sellerId,
        amount: paid.amount,
        payer,
      };
      entry.count += served;
      options.record.served.set(paid.txHash, entry);
      options.record.successTimes.push(Date.now());
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

async function x402(options: LoadOptions, buyer: Wallet, seller: Seller): Promise<string> {
  options.record.requests += 2;
  const outcome = await payWithX402(`${options.baseUrl}/api/v1/skills/${seller.skill}/work`, buyer);
  if (outcome.status === 200 && outcome.txHash) {
    const entry = options.record.served.get(outcome.txHash) ?? {
      count: 0,
      sellerId: seller.sellerId,
      amount: '',
    };
    entry.count += 1;
    options.record.served.set(outcome.txHash, entry);
    options.record.successTimes.push(Date.now());
    return 'served';
  }
  return `status ${outcome.status} ${outcome.code ?? ''}`.trim();
}

async function settleNow(options: LoadOptions, seller: Seller): Promise<string> {
  options.record.requests++;
  const response = await fetch(`${options.baseUrl}/api/v1/operator/settlements/run`, {
    method: 'POST',
    headers: { authorization: `Bearer ${options.operatorToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ sellerId: seller.sellerId }),
    signal: AbortSignal.timeout(30_000),
  });
  return response.ok ? 'accepted' : `status ${response.status} ${await errorCode(response)}`;
}

async function refund(options: LoadOptions, seller: Seller, prng: Prng): Promise<string> {
  const list = await fetch(`${options.baseUrl}/api/v1/transactions?limit=20`, {
    headers: { authorization: `Bearer ${seller.apiKey}` },
    signal: AbortSignal.timeout(15_000),
  });
  if (!list.ok) return `list ${list.status} ${await errorCode(list)}`;
  const { data } = (await list.json()) as { data: Array<{ transactionId: string; amount: string }> };
  if (!data?.length) return 'nothing to refund';
  const transaction = prng.pick(data);
  const full = prng.chance(0.5);
  const amount = full ? transaction.amount : '0.001';
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

const OPERATOR_POLL_MS = 1000;
const USDC_INTERFACE = new Interface(usdcAbi);

async function transferUsdc(options: LoadOptions, buyer: Wallet, to: string, amountMicro: bigint) {
  const usdc = new Contract(options.usdcAddress, usdcAbi, buyer);
  const tx = await usdc.getFunction('transfer')(to, amountMicro);
  const receipt = await tx.wait(1, 20_000);
  return receipt.hash as string;
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
      Array.from({ length: 1 + replays }, () =>
        fetch(`${options.baseUrl}/api/verify`, {
          method: 'POST',
          headers: { authorization: `Bearer ${seller.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            payment: paid.header,
            price: requirements.price,
            type: 'payPerCall',
            resource: requirements.resource,
          }),
          signal: AbortSignal.timeout(10_000),
        })
          .then(async (r) => ({
            status: r.status,
            body: (await r.json().catch(() => ({}))) as {
              valid?: boolean;
              reason?: string;
              payment?: { reused?: boolean };
            },
          }))
          .catch(() => ({
            status: 0,
            body: {} as { valid?: boolean; reason?: string; payment?: { reused?: boolean } },
          })),
      ),
    );
    const fresh = answers.filter((a) => a.body.valid === true && a.body.payment?.reused !== true).length;
    if (answers.some((a) => a.body.valid === true)) {
      const entry = options.record.served.get(paid.txHash) ?? {
        count: 0,
        sellerId: seller.sellerId,
        amount: paid.amount,
        payer,
      };
      // Reused only: an earlier round's fresh answer was lost on the way (a 5xx at the balancer): one served.
      entry.count += fresh === 0 && entry.count === 0 ? 1 : fresh;
      options.record.served.set(paid.txHash, entry);
      options.record.successTimes.push(Date.now());
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

type SessionView = { sessionId: string; exactAmount: string; walletAddress: string; status: string };

/** Polls a session (as the widget's fallback does) until it is paid, bounded. */
async function waitSessionPaid(options: LoadOptions, sessionId: string): Promise<string> {
  const deadline = Date.now() + 30_000;
  let status = 'unknown';
  while (Date.now() < deadline) {
    options.record.requests++;
    const view = await getSession(options.baseUrl, sessionId).catch(() => undefined);
    status = view?.status ?? status;
    if (/^(paid|paid_late|overpaid)$/.test(status)) return status;
    await new Promise((r) => setTimeout(r, OPERATOR_POLL_MS));
  }
  return `still ${status}`;
}

/** A session's payment is mined: the widget's view must turn paid; a paid session is a served purchase. */
async function awaitCheckoutPaid(
  options: LoadOptions,
  buyer: Wallet,
  seller: Seller,
  session: { sessionId: string; exactAmount: string },
  txHash: string,
): Promise<string> {
  options.record.checkoutPaid.push({ sessionId: session.sessionId, txHash });
  const status = await waitSessionPaid(options, session.sessionId);
  if (status.startsWith('still')) return `session ${status}`;
  // Exactly one ledger payment of its transfer is expected, like a served call.
  options.record.served.set(txHash.toLowerCase(), {
    count: 1,
    sellerId: seller.sellerId,
    amount: session.exactAmount,
    payer: buyer.address.toLowerCase(),
  });
  options.record.successTimes.push(Date.now());
  return status;
}

/** A seller's server opens a checkout session; the buyer sends its exact amount to the session's address. */
async function checkoutByTransfer(options: LoadOptions, buyer: Wallet, seller: Seller): Promise<string> {
  options.record.requests++;
  const created = await fetch(`${options.baseUrl}/api/v1/checkout/sessions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${seller.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ amount: '0.25', description: 'chaos order', holdPeriodHours: 0 }),
    signal: AbortSignal.timeout(15_000),
  });
  if (created.status !== 201) return `create ${created.status} ${await errorCode(created)}`;
  const session = (await created.json()) as SessionView;
  const txHash = await transferUsdc(options, buyer, session.walletAddress, parseUsdc(session.exactAmount));
  return awaitCheckoutPaid(options, buyer, seller, session, txHash);
}

/** The widget's flow: a session from the publishable key, paid through the browser wallet (EIP-1193). */
async function checkoutByWallet(options: LoadOptions, buyer: Wallet, seller: Seller): Promise<string> {
  options.record.requests++;
  let session: Awaited<ReturnType<typeof createSession>>;
  try {
    session = await createSession(options.baseUrl, seller.publishableKey, { skill: seller.skill });
  } catch (error) {
    return `create ${(error as { status?: number }).status ?? 0} ${(error as { code?: string }).code ?? ''}`.trim();
  }
  // What the widget asks the browser wallet for (eth_sendTransaction of a USDC transfer to the session's
  // address, libs/checkout-widget/src/wallet.ts), sent by the buyer's key.
  const sent = await buyer.sendTransaction({
    to: session.tokenAddress,
    data: USDC_INTERFACE.encodeFunctionData('transfer', [
      session.walletAddress,
      parseUsdc(session.exactAmount),
    ]),
  });
  const txHash = sent.hash;
  const receipt = await buyer.provider!.waitForTransaction(txHash, 1, 20_000);
  if (receipt?.status !== 1) return 'wallet transaction not mined';
  return awaitCheckoutPaid(options, buyer, seller, session, txHash);
}

/**
 * USDC sent to checkout's shared deposit wallet that matches no session (checkout keeps such transfers for an
 * operator; one to the agent escrow is an agent's to claim); the operator finds it among the unmatched and sends
 * it back.
 */
async function unmatchedTransfer(options: LoadOptions, buyer: Wallet, prng: Prng): Promise<string> {
  const amountMicro = BigInt(prng.int(1001, 9999));
  const txHash = (
    await transferUsdc(options, buyer, options.checkoutEscrowAddress, amountMicro)
  ).toLowerCase();
  const deadline = Date.now() + 35_000;
  while (Date.now() < deadline) {
    options.record.requests++;
    const list = await fetch(`${options.baseUrl}/api/v1/operator/transfers?status=unmatched&limit=200`, {
      headers: { authorization: `Bearer ${options.operatorToken}` },
      signal: AbortSignal.timeout(10_000),
    }).catch(() => undefined);
    if (list?.ok) {
      const { transfers } = (await list.json()) as {
        transfers?: Array<{ transferId: string; txHash: string }>;
      };
      const ours = transfers?.find((t) => t.txHash.toLowerCase() === txHash);
      if (ours) {
        options.record.requests++;
        const refunded = await fetch(
          `${options.baseUrl}/api/v1/operator/transfers/${ours.transferId}/refund`,
          {
            method: 'POST',
            headers: { authorization: `Bearer ${options.operatorToken}`, 'content-type': 'application/json' },
            body: JSON.stringify({ note: 'chaos: sent by mistake' }),
            signal: AbortSignal.timeout(15_000),
          },
        );
        return refunded.ok
          ? 'operator refund accepted'
          : `operator refund ${refunded.status} ${await errorCode(refunded)}`;
      }
    }
    await new Promise((r) => setTimeout(r, OPERATOR_POLL_MS));
  }
  return 'not listed as unmatched in time';
}

/** A buyer asks for a refund of one of its payments (signed by its wallet); the seller approves or rejects it. */
async function refundRequest(
  options: LoadOptions,
  buyer: Wallet,
  seller: Seller,
  prng: Prng,
): Promise<string> {
  const mine = [...options.record.served.entries()].filter(
    ([, s]) => s.sellerId === seller.sellerId && s.payer === buyer.address.toLowerCase(),
  );
  if (mine.length === 0) return 'nothing to ask back';
  const [txHash] = prng.pick(mine);
  // The payment is the transaction's USDC Transfer log; its index counts within the block.
  const receipt = await buyer.provider!.getTransactionReceipt(txHash);
  const transferLog = receipt?.logs.find(
    (l) => l.topics[0] === USDC_INTERFACE.getEvent('Transfer')!.topicHash,
  );
  if (!transferLog) return 'payment no longer on chain';
  options.record.requests++;
  const lookup = await fetch(
    `${options.baseUrl}/api/v1/transactions/lookup?txHash=${txHash}&logIndex=${transferLog.index}`,
    { signal: AbortSignal.timeout(10_000) },
  );
  if (!lookup.ok) return `lookup ${lookup.status} ${await errorCode(lookup)}`;
  const { transactionId } = (await lookup.json()) as { transactionId: string };
  const { chainId } = await buyer.provider!.getNetwork();
  const signing = {
    chainId: Number(chainId),
    // 128 bits, 32 lowercase hex characters (the ledger's rule), drawn from the seed.
    nonce: Array.from({ length: 4 }, () =>
      prng
        .int(0, 2 ** 31)
        .toString(16)
        .padStart(8, '0'),
    ).join(''),
    expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
  };
  const reason = 'chaos: not what I asked for';
  options.record.requests++;
  const filed = await fetch(`${options.baseUrl}/api/v1/refund-requests`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      transactionId,
      reason,
      ...signing,
      signature: await buyer.signMessage(refundRequestMessage({ transactionId }, reason, signing)),
    }),
    signal: AbortSignal.timeout(15_000),
  });
  if (filed.status !== 201) return `request ${filed.status} ${await errorCode(filed)}`;
  const { refundRequestId } = (await filed.json()) as { refundRequestId: string };
  const approve = prng.chance(0.5);
  options.record.requests++;
  const decided = await fetch(
    `${options.baseUrl}/api/v1/refund-requests/${refundRequestId}/${approve ? 'approve' : 'reject'}`,
    {
      method: 'POST',
      headers: { authorization: `Bearer ${seller.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(approve ? {} : { reason: 'delivered' }),
      signal: AbortSignal.timeout(15_000),
    },
  );
  if (!decided.ok) return `${approve ? 'approve' : 'reject'} ${decided.status} ${await errorCode(decided)}`;
  if (approve) {
    const body = (await decided.json()) as { refund?: { refundId?: string } };
    if (body.refund?.refundId) options.record.refundsAccepted.push(body.refund.refundId);
  }
  return approve ? 'approved' : 'rejected';
}

/** Mid-run account changes: the seller rotates its API key (wallet session) or moves its payout address. */
export async function rotateApiKey(baseUrl: string, seller: Seller): Promise<string> {
  const rotated = await fetch(`${baseUrl}/api/v1/account/api-key/rotate`, {
    method: 'POST',
    headers: { authorization: `Bearer ${seller.sessionToken}`, 'content-type': 'application/json' },
    body: '{}',
    signal: AbortSignal.timeout(15_000),
  });
  if (!rotated.ok) return `key rotation ${rotated.status} ${await errorCode(rotated)}`;
  seller.apiKey = ((await rotated.json()) as { apiKey: string }).apiKey;
  return 'key rotated';
}

export async function changePayoutAddress(baseUrl: string, seller: Seller): Promise<string> {
  const payoutAddress = Wallet.createRandom().address;
  const challenge = await fetch(`${baseUrl}/api/v1/account/payout-address/challenge`, {
    method: 'POST',
    headers: { authorization: `Bearer ${seller.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ payoutAddress }),
    signal: AbortSignal.timeout(15_000),
  });
  if (!challenge.ok) return `payout challenge ${challenge.status} ${await errorCode(challenge)}`;
  const { message } = (await challenge.json()) as { message: string };
  const changed = await fetch(`${baseUrl}/api/v1/account/payout-address`, {
    method: 'POST',
    headers: { authorization: `Bearer ${seller.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ message, signature: await seller.wallet.signMessage(message) }),
    signal: AbortSignal.timeout(15_000),
  });
  return changed.ok
    ? 'payout address changed'
    : `payout change ${changed.status} ${await errorCode(changed)}`;
}

/** The error code of a refusal (`error.code`), for the report's outcome counts. */
async function errorCode(response: Response): Promise<string> {
  const body = (await response.json().catch(() => null)) as { error?: { code?: string } } | null;
  return body?.error?.code ?? '';
}
