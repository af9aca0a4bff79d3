/**
 * Paygate's x402 facilitator side by side with the unmodified reference facilitator (`@x402/core`'s
 * x402Facilitator + `@x402/evm`'s exact scheme, signing with a viem account under viem's nonce manager, served
 * over HTTP as x402's example facilitator does) on the same anvil, for the same kind of payment: verify, one
 * settle, ten concurrent settles. Each settle measurement starts at the same point of the block cycle for both
 * (a random offset after a new block, used once for each), so neither is favoured by where the block falls.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { makeProvider } from '@paygate/chain';
import type { Harness } from '@paygate/gateway-proxy/test/harness';
import { signTransferAuthorization, testSigner, testWallets, waitFor } from '@paygate/testing';
import { x402Facilitator } from '@x402/core/facilitator';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/facilitator';
import { type JsonRpcProvider, WebSocketProvider } from 'ethers';
import { createWalletClient, defineChain, nonceManager, publicActions, http as viemHttp } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

const AMOUNT = '10000'; // 0.01 USDC, Paygate's minimum relayed payment
const BURST = 10;

export interface Side {
  name: 'paygate' | 'reference';
  url: string;
  headers: Record<string, string>;
}

/** The reference facilitator as x402's example runs it: x402Facilitator + ExactEvmScheme over a viem client. */
export async function startReferenceFacilitator(input: {
  rpcUrl: string;
  chainId: number;
  privateKey: string;
  /** viem's receipt polling: set to Paygate relayer's receipt poll, so both look for the block as often. */
  pollingIntervalMs: number;
}): Promise<{ url: string; close(): Promise<void> }> {
  const chain = defineChain({
    id: input.chainId,
    name: 'anvil',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [input.rpcUrl] } },
  });
  const account = privateKeyToAccount(input.privateKey as `0x${string}`, { nonceManager });
  const client = createWalletClient({
    account,
    chain,
    transport: viemHttp(input.rpcUrl),
    pollingInterval: input.pollingIntervalMs,
  }).extend(publicActions);
  const signer = toFacilitatorEvmSigner({
    address: account.address,
    readContract: (args) => client.readContract({ ...args, args: args.args ?? [] } as never),
    verifyTypedData: (args) => client.verifyTypedData(args as never),
    writeContract: (args) => client.writeContract({ ...args, args: args.args } as never),
    sendTransaction: (args) => client.sendTransaction(args as never),
    waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args),
    getCode: (args) => client.getCode(args),
  });
  const facilitator = new x402Facilitator().register(`eip155:${input.chainId}`, new ExactEvmScheme(signer));
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', async () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        const answer =
          req.url === '/verify'
            ? await facilitator.verify(body.paymentPayload, body.paymentRequirements)
            : req.url === '/settle'
              ? await facilitator.settle(body.paymentPayload, body.paymentRequirements)
              : undefined;
        res.writeHead(answer ? 200 : 404, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify(answer ?? { error: 'not found' }, (_k, v) => (typeof v === 'bigint' ? `${v}` : v)),
        );
      } catch (error) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: (error as Error).message }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A fresh, well-signed 0.01 USDC payment by the buyer into escrow, as a facilitator request body. */
async function paymentBody(h: Harness): Promise<string> {
  const signed = await signTransferAuthorization(testSigner('buyer', h.anvil.provider), {
    chainId: h.anvil.chainId,
    usdcAddress: h.usdcAddress,
    to: testWallets.escrow.address,
    valueMicro: BigInt(AMOUNT),
  });
  const paymentRequirements = {
    scheme: 'exact',
    network: `eip155:${h.anvil.chainId}`,
    asset: h.usdcAddress,
    payTo: testWallets.escrow.address,
    amount: AMOUNT,
    maxTimeoutSeconds: 60,
    extra: { name: 'USD Coin', version: '2' },
  };
  return JSON.stringify({
    x402Version: 2,
    paymentPayload: {
      x402Version: 2,
      resource: { url: 'https://seller.example/report', description: 'bench', mimeType: 'application/json' },
      accepted: paymentRequirements,
      payload: signed,
    },
    paymentRequirements,
  });
}

/**
 * When each block reached the bench (anvil pushes new heads over its WebSocket): an answer's time after the head
 * of its block is what a facilitator adds once the block exists (noticing it, then answering), apart from where
 * the block cycle falls.
 */
export async function watchHeads(
  rpcUrl: string,
): Promise<{ latestBefore(at: number): number; close(): Promise<void> }> {
  const provider = new WebSocketProvider(rpcUrl.replace(/^http/, 'ws'));
  const seenAt: number[] = [];
  await provider.on('block', () => {
    seenAt.push(performance.now());
  });
  return {
    latestBefore: (at) => {
      for (let i = seenAt.length - 1; i >= 0; i--) if (seenAt[i]! <= at) return seenAt[i]!;
      return Number.NaN;
    },
    close: async () => {
      await provider.destroy();
    },
  };
}

async function call(
  side: Side,
  path: 'verify' | 'settle',
  body: string,
): Promise<{ ms: number; endedAt: number }> {
  const started = performance.now();
  const res = await fetch(`${side.url}/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...side.headers },
    body,
    signal: AbortSignal.timeout(30_000),
  });
  const answer = (await res.json()) as { isValid?: boolean; success?: boolean };
  const endedAt = performance.now();
  const ms = endedAt - started;
  if (process.env.X402_DEBUG && path === 'settle')
    console.log(side.name, Math.round(ms), res.headers.get('server-timing'));
  const ok = path === 'verify' ? answer.isValid : answer.success;
  if (res.status !== 200 || !ok)
    throw new Error(`${side.name} ${path}: ${res.status} ${JSON.stringify(answer)}`);
  return { ms, endedAt };
}

/** A poll of the head that waits at most this long: one unanswered request must not use up the whole wait. */
const HEAD_POLL_TIMEOUT_MS = 1000;
const headPollers = new WeakMap<Harness, JsonRpcProvider>();

/** Resolves just after anvil mines its next block (polled every 5 ms, each poll and the whole wait bounded). */
async function nextBlock(h: Harness): Promise<void> {
  let poller = headPollers.get(h);
  if (!poller) {
    poller = makeProvider(h.anvil.rpcUrl, { timeoutMs: HEAD_POLL_TIMEOUT_MS, chainId: h.anvil.chainId });
    headPollers.set(h, poller);
  }
  const head = await poller.getBlockNumber();
  let unanswered = 0;
  await waitFor(
    async () => {
      const now = await poller.getBlockNumber().catch(() => {
        unanswered += 1;
        return head;
      });
      return now > head;
    },
    {
      timeoutMs: 10_000,
      intervalMs: 5,
      message: async () =>
        `anvil mined no block after ${head} (${unanswered} polls unanswered within ${HEAD_POLL_TIMEOUT_MS} ms)`,
    },
  );
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface Comparison {
  rounds: { verify: number; settle: number; burst: number };
  paygate: Record<'verify' | 'settle' | 'burst', number[]>;
  reference: Record<'verify' | 'settle' | 'burst', number[]>;
  /** Each settle's (a burst's last) answer after the head of the block that included it. */
  afterBlock: Record<'paygate' | 'reference', Record<'settle' | 'burst', number[]>>;
}

/**
 * Verify (back to back), one settle and a burst of ten concurrent settles, each measured for both sides in
 * alternating order; a settle starts at the same random offset after a block for both sides.
 */
export async function compareFacilitators(
  h: Harness,
  sides: [Side, Side],
  rounds = { verify: 20, settle: 10, burst: 5 },
  blockTimeMs = 1000,
  heads: { latestBefore(at: number): number },
): Promise<Comparison> {
  const out: Comparison = {
    rounds,
    paygate: { verify: [], settle: [], burst: [] },
    reference: { verify: [], settle: [], burst: [] },
    afterBlock: { paygate: { settle: [], burst: [] }, reference: { settle: [], burst: [] } },
  };
  const ordered = (round: number) => (round % 2 === 0 ? sides : ([sides[1], sides[0]] as const));
  // Warm-up: one verify and one settle each (connections, caches, the token's domain).
  for (const side of sides) {
    await call(side, 'verify', await paymentBody(h));
    await call(side, 'settle', await paymentBody(h));
  }
  for (let round = 0; round < rounds.verify; round++) {
    for (const side of ordered(round))
      out[side.name].verify.push((await call(side, 'verify', await paymentBody(h))).ms);
  }
  for (let round = 0; round < rounds.settle; round++) {
    const offsetMs = Math.floor(Math.random() * blockTimeMs * 0.8);
    for (const side of ordered(round)) {
      const body = await paymentBody(h);
      await nextBlock(h);
      await delay(offsetMs);
      const { ms, endedAt } = await call(side, 'settle', body);
      out[side.name].settle.push(ms);
      out.afterBlock[side.name].settle.push(endedAt - heads.latestBefore(endedAt));
    }
    process.stdout.write(
      `settle round ${round + 1}/${rounds.settle}: paygate ${Math.round(out.paygate.settle.at(-1)!)} ms (${Math.round(out.afterBlock.paygate.settle.at(-1)!)} after the block), reference ${Math.round(out.reference.settle.at(-1)!)} ms (${Math.round(out.afterBlock.reference.settle.at(-1)!)})\n`,
    );
  }
  for (let round = 0; round < rounds.burst; round++) {
    const offsetMs = Math.floor(Math.random() * blockTimeMs * 0.8);
    for (const side of ordered(round)) {
      const bodies = await Promise.all(Array.from({ length: BURST }, () => paymentBody(h)));
      await nextBlock(h);
      await delay(offsetMs);
      const started = performance.now();
      const answers = await Promise.all(bodies.map((body) => call(side, 'settle', body)));
      const endedAt = Math.max(...answers.map((a) => a.endedAt));
      out[side.name].burst.push(endedAt - started);
      out.afterBlock[side.name].burst.push(endedAt - heads.latestBefore(endedAt));
    }
    process.stdout.write(
      `burst round ${round + 1}/${rounds.burst}: paygate ${Math.round(out.paygate.burst.at(-1)!)} ms (${Math.round(out.afterBlock.paygate.burst.at(-1)!)} after the block), reference ${Math.round(out.reference.burst.at(-1)!)} ms (${Math.round(out.afterBlock.reference.burst.at(-1)!)})\n`,
    );
  }
  return out;
}
