/**
 * The run's participants: sellers with a paid API skill (0 h hold) and a failing one (its upstream answers 500, never
 * answers, or drops the connection: every paid call of it must come back to its buyer), every other one matching
 * its checkout sessions by deposit address (the rest by unique amount, the default), and buyers with ETH and USDC
 * of their own; and the account changes a seller makes mid-run (a key rotation, a new payout address).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { usdcAbi } from '@paygate/chain';
import { createActiveSkill, signUpSeller, testWallets } from '@paygate/testing';
import { Contract, JsonRpcProvider, NonceManager, Wallet } from 'ethers';
import type pg from 'pg';
import type { LoadRecord } from './load';
import type { Prng } from './prng';

export interface Seller {
  sellerId: string;
  /** Replaced mid-run by a key rotation (the old key keeps working for its overlap). */
  apiKey: string;
  publishableKey: string;
  sessionToken: string;
  skill: string;
  /** The skill whose paid routes fail (FAILING_PATHS): no paid call of it is ever served. */
  failingSkill: string;
  wallet: Wallet;
  /** How its checkout sessions are matched (the account's `checkoutMatching`, set at sign-up). */
  checkoutMatching: CheckoutMatching;
}

/** How the failing skill's upstream fails a paid call: the three ways the gateway calls a seller failure. */
export type SellerFailureKind = 'status500' | 'timeout' | 'connectionDropped';
export const FAILING_PATHS: Record<SellerFailureKind, string> = {
  status500: '/fail',
  timeout: '/hang',
  connectionDropped: '/drop',
};

/** The failing skill's MCP tool for a path (the gateway's `<skill>__<method>_<path>`). */
export const failingTool = (seller: Seller, kind: SellerFailureKind) =>
  `${seller.failingSkill}__get_${FAILING_PATHS[kind].slice(1)}`;

export type CheckoutMatching = 'amount' | 'deposit_address';
export const CHECKOUT_MATCHINGS: readonly CheckoutMatching[] = ['amount', 'deposit_address'];

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
      // Half the sellers in each mode: the load pays sessions of both.
      const checkoutMatching: CheckoutMatching = i % 2 === 1 ? 'deposit_address' : 'amount';
      // Drawn before the first await, so in the sellers' order whatever their sign-ups' timing.
      const failingPrices = Object.values(FAILING_PATHS).map(() => `0.01${options.prng.int(0, 9)}`);
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
      // The failing skill holds its payments for an hour: a refund of an unserved call comes out of the hold, so
      // the seller's payouts never take it (with 0 h a payment can be released before its failure is known).
      // Prices from 0.010: x402's minimum; two unserved calls of one payer reach the run's refund threshold.
      const failingSkill = `chaos-failing-${i}-${signed.sellerId.slice(-6).toLowerCase()}`;
      await createActiveSkill(
        options.baseUrl,
        signed.apiKey,
        {
          name: failingSkill,
          type: 'API',
          apiBaseUrl: options.upstreamUrl,
          holdPeriodHours: 1,
          endpoints: Object.values(FAILING_PATHS).map((path, p) => ({
            path,
            method: 'GET',
            priceUsdc: failingPrices[p]!,
            description: `fails (${path})`,
          })),
        } as Parameters<typeof createActiveSkill>[2],
        { timeoutMs: 60_000 },
      );
      const account = await fetch(`${options.baseUrl}/api/v1/account`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${signed.sessionToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          webhookUrl: options.webhookUrl,
          minimumSettlement: '0.001',
          checkoutMatching,
        }),
        signal: AbortSignal.timeout(10_000),
      });
      if (!account.ok) throw new Error(`seller settings: ${account.status} ${await account.text()}`);
      const settled = (await account.json()) as { account: { checkoutMatching?: string } };
      if (settled.account.checkoutMatching !== checkoutMatching)
        throw new Error(
          `seller settings: checkoutMatching ${settled.account.checkoutMatching}, not ${checkoutMatching}`,
        );
      return {
        sellerId: signed.sellerId,
        apiKey: signed.apiKey,
        publishableKey: signed.publishableKey,
        sessionToken: signed.sessionToken,
        skill,
        failingSkill,
        wallet,
        checkoutMatching,
      };
    }),
  );
}

/**
 * Waits (bounded) until checkout's projection of every seller holds its matching mode (`seller.updated` consumed),
 * so no session of the load is created before checkout knows the seller's choice. No session of these sellers
 * exists yet, so no replica has the seller cached with the old mode.
 */
export async function awaitCheckoutMatching(
  client: pg.Client,
  sellers: Seller[],
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let missing = sellers.map((s) => s.sellerId);
  while (Date.now() < deadline) {
    const rows = await client
      .query(`select seller_id, checkout_matching from checkout.sellers where seller_id = any($1)`, [
        sellers.map((s) => s.sellerId),
      ])
      .catch(() => ({ rows: [] as Array<{ seller_id: string; checkout_matching: string }> }));
    const projected = new Map(rows.rows.map((r) => [r.seller_id, r.checkout_matching]));
    missing = sellers.filter((s) => projected.get(s.sellerId) !== s.checkoutMatching).map((s) => s.sellerId);
    if (missing.length === 0) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`checkout did not project the matching mode of ${missing.join(', ')} in ${timeoutMs} ms`);
}

/**
 * Waits (bounded) until the gateway offers x402 for every failing route and lists its MCP tools, so the load's first
 * failing calls are paid (a route the gateway does not know yet answers 404, before anything is charged).
 */
export async function awaitFailingRoutes(
  baseUrl: string,
  sellers: Seller[],
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const kinds = Object.keys(FAILING_PATHS) as SellerFailureKind[];
  const wanted = sellers.flatMap((seller) => kinds.map((kind) => ({ seller, kind })));
  let missing = wanted.map(({ seller, kind }) => failingTool(seller, kind));
  while (Date.now() < deadline) {
    const tools = await listMcpTools(baseUrl).catch(() => new Set<string>());
    const offered = await Promise.all(
      wanted.map(({ seller, kind }) =>
        fetch(`${baseUrl}/api/v1/skills/${seller.failingSkill}${FAILING_PATHS[kind]}`, {
          signal: AbortSignal.timeout(10_000),
        })
          .then((r) => r.status === 402 && r.headers.get('payment-required') !== null)
          .catch(() => false),
      ),
    );
    missing = wanted
      .filter(({ seller, kind }, i) => !offered[i] || !tools.has(failingTool(seller, kind)))
      .map(({ seller, kind }) => failingTool(seller, kind));
    if (missing.length === 0) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`the gateway did not offer the failing routes ${missing.join(', ')} in ${timeoutMs} ms`);
}

/** The tool names the gateway's MCP endpoint lists (every page). */
async function listMcpTools(baseUrl: string): Promise<Set<string>> {
  const client = new Client({ name: 'chaos-setup', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/api/v1/mcp`)));
  try {
    const names = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      for (const tool of page.tools) names.add(tool.name);
      cursor = page.nextCursor;
    } while (cursor);
    return names;
  } finally {
    await client.close().catch(() => undefined);
  }
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

/**
 * After `afterMs`, one seller rotates its API key and another moves its payout address; each change is retried on a
 * 5xx or no answer (a fault may be under way), as the seller would, bounded; the outcomes go in the record.
 */
export async function changeAccountsMidway(options: {
  baseUrl: string;
  sellers: Seller[];
  afterMs: number;
  record: LoadRecord;
  log: (line: string) => void;
}): Promise<void> {
  await new Promise((r) => setTimeout(r, options.afterMs));
  const rotated = options.sellers[0]!;
  const moved = options.sellers[1 % options.sellers.length]!;
  for (const [kind, change] of [
    ['keyRotation', () => rotateApiKey(options.baseUrl, rotated)],
    ['payoutAddressChange', () => changePayoutAddress(options.baseUrl, moved)],
  ] as const) {
    let outcome = '';
    for (let attempt = 0; attempt < 6; attempt++) {
      outcome = await change().catch((error: Error) => `error: ${error.message.slice(0, 60)}`);
      if (!/ 5\d\d |^error/.test(outcome)) break;
      await new Promise((r) => setTimeout(r, 2000));
    }
    options.record.operations[kind] = { [outcome]: 1 };
    options.record.accountChanges.push(`${kind}: ${outcome}`);
    options.log(`${kind}: ${outcome}`);
  }
}

/** Mid-run account changes: the seller rotates its API key (wallet session) or moves its payout address. */
async function rotateApiKey(baseUrl: string, seller: Seller): Promise<string> {
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

async function changePayoutAddress(baseUrl: string, seller: Seller): Promise<string> {
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
export async function errorCode(response: Response): Promise<string> {
  const body = (await response.json().catch(() => null)) as { error?: { code?: string } } | null;
  return body?.error?.code ?? '';
}
