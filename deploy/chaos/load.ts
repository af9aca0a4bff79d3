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
import { createAgent, PAYMENT_HEADER, type PaymentRequirements } from '@paygate/agent-client';
import { usdcAbi } from '@paygate/chain';
import { createActiveSkill, signUpSeller, testWallets } from '@paygate/testing';
import { Contract, JsonRpcProvider, NonceManager, Wallet } from 'ethers';
import type { Prng } from './prng';
import { payWithX402 } from './x402-payment';

export type OperationKind = 'payment' | 'x402' | 'settleNow' | 'refund';

export interface Seller {
  sellerId: string;
  apiKey: string;
  sessionToken: string;
  skill: string;
  wallet: Wallet;
}

export interface LoadRecord {
  operations: Record<string, Record<string, number>>;
  /** tx hash → number of 200 answers it bought (must be ≤ 1) and the seller it paid. */
  served: Map<string, { count: number; sellerId: string; amount: string }>;
  /** Transfers sent whose call was never served (the money is in escrow, unclaimed or claimed and failed). */
  unserved: string[];
  refundsAccepted: string[];
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

const WEIGHTS: Record<OperationKind, number> = { payment: 62, x402: 18, settleNow: 8, refund: 12 };

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
        const operation =
          kind === 'payment'
            ? payment(options, agent, seller, prng)
            : kind === 'x402'
              ? x402(options, buyer, seller)
              : kind === 'settleNow'
                ? settleNow(options, seller)
                : refund(options, seller, prng);
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

/** The error code of a refusal (`error.code`), for the report's outcome counts. */
async function errorCode(response: Response): Promise<string> {
  const body = (await response.json().catch(() => null)) as { error?: { code?: string } } | null;
  return body?.error?.code ?? '';
}
