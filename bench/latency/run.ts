/**
 * Latency benchmark: from the block that carries a checkout payment being mined to (a) the widget's WebSocket
 * `session` message with the paid status and (b) the seller's `payment.confirmed` webhook arriving. Measured in
 * both ways a seller's sessions are matched: by unique amount at the checkout wallet (the default) and at a deposit
 * address per session; each payment goes where its session says (walletAddress, exactAmount).
 *
 * Real parts: anvil with 1-second blocks and TestUSDC, Postgres, NATS JetStream, and chain-indexer (1
 * confirmation), checkout and notifier started in this process with their default settings otherwise.
 * "Mined" is when a 5 ms poll of eth_blockNumber first sees the block, so figures slightly understate.
 *
 * Run: `npx tsx bench/latency/run.ts` (env: LATENCY_ROUNDS, LATENCY_PER_BLOCK).
 * Writes bench/results/latency.json and the latency section of docs/benchmarks.md.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig as chainIndexerConfig, startChainIndexer } from '@paygate/chain-indexer';
import { loadConfig as checkoutConfig, startCheckout } from '@paygate/checkout';
import { loadConfig as ledgerConfig, startEscrowLedger } from '@paygate/escrow-ledger';
import { loadConfig as notifierConfig, startNotifier } from '@paygate/notifier';
import {
  publish,
  sellerUpdated,
  serveWebhookSecrets,
  WebhookReceiver,
  WidgetSocket,
} from '@paygate/notifier/test/helpers';
import {
  createTestEnvironment,
  deployTestUsdc,
  fundTestWallets,
  serveSellersForTests,
  startAnvil,
  testWallets,
  waitFor,
} from '@paygate/testing';

const ROOT = path.resolve(__dirname, '../..');
const ROUNDS = Number(process.env.LATENCY_ROUNDS ?? 10);
const PER_BLOCK = Number(process.env.LATENCY_PER_BLOCK ?? 3);
const BLOCK_TIME_MS = 1000;
const TARGET_P99_MS = BLOCK_TIME_MS + 300;
const MODES = ['amount', 'deposit_address'] as const;
type Mode = (typeof MODES)[number];

interface Sample {
  mode: Mode;
  sessionId: string;
  block: number;
  /** Block mined to transfer.observed on the bus: the chain-indexer's share. */
  observedMs: number;
  websocketMs: number;
  webhookMs: number;
}

async function rpc<T>(url: string, method: string, params: unknown[]): Promise<T> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    signal: AbortSignal.timeout(5000),
  });
  const body = (await response.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

/** ERC-20 transfer(to, amount) calldata, without an ABI library. */
function transferCalldata(to: string, amountMicro: bigint): string {
  return `0xa9059cbb${to.slice(2).toLowerCase().padStart(64, '0')}${amountMicro.toString(16).padStart(64, '0')}`;
}

function microOf(amount: string): bigint {
  const [whole = '0', fraction = ''] = amount.split('.');
  return BigInt(whole) * 1_000_000n + BigInt(fraction.padEnd(6, '0'));
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1] ?? Number.NaN;
}

function summary(values: number[]) {
  return {
    p50Ms: Math.round(percentile(values, 50)),
    p99Ms: Math.round(percentile(values, 99)),
    maxMs: Math.round(Math.max(...values)),
    meanMs: Math.round(values.reduce((a, b) => a + b, 0) / values.length),
  };
}

async function main(): Promise<void> {
  const env = await createTestEnvironment('benchlat');
  const anvil = await startAnvil({ blockTimeSec: 1 });
  const stops: Array<() => Promise<unknown> | unknown> = [];
  let blockWatcher: NodeJS.Timeout | undefined;
  try {
    const { address: usdc } = await deployTestUsdc(anvil.rpcUrl);
    await fundTestWallets({
      rpcUrl: anvil.rpcUrl,
      usdcAddress: usdc,
      amountMicro: 1_000_000_000n,
      roles: ['buyer'],
    });

    const bus = await env.bus();
    const sellerId = `sel_bench_${randomBytes(3).toString('hex')}`;
    const secretKey = `sk_bench_${randomBytes(12).toString('hex')}`;
    const publishableKey = `pk_bench_${randomBytes(12).toString('hex')}`;
    const auth = await serveSellersForTests(bus, {
      [secretKey]: {
        sellerId,
        walletAddress: testWallets.seller.address,
        payoutAddress: testWallets.seller.address,
        publishableKey,
        apiKeyVersion: 1,
      },
    });
    const secrets = await serveWebhookSecrets(bus, { [sellerId]: { secret: 'whsec_bench', version: 1 } });
    stops.push(
      () => auth.stop(),
      () => secrets.stop(),
    );
    const receiver = await new WebhookReceiver().start();
    stops.push(() => receiver.stop());

    const common = { LOG_LEVEL: 'warn' };
    const indexer = await startChainIndexer(
      chainIndexerConfig(
        env.envFor('chain-indexer', {
          ...common,
          CHAIN_RPC_URL: anvil.rpcUrl,
          USDC_ADDRESS: usdc,
          ESCROW_ADDRESS: testWallets.escrow.address,
          CHECKOUT_ESCROW_ADDRESS: testWallets.checkoutEscrow.address,
          CONFIRMATIONS: '1',
        }),
      ),
    );
    stops.push(() => indexer.stop());
    // The ledger owns transfer claims: checkout asks it before a transfer may pay a session.
    const ledger = await startEscrowLedger(
      ledgerConfig(
        env.envFor('escrow-ledger', {
          ...common,
          CHAIN_RPC_URL: anvil.rpcUrl,
          USDC_ADDRESS: usdc,
          ESCROW_ADDRESS: testWallets.escrow.address,
          CONFIRMATIONS: '1',
        }),
      ),
    );
    stops.push(() => ledger.stop());
    const checkout = await startCheckout(
      checkoutConfig(
        env.envFor('checkout', {
          ...common,
          USDC_ADDRESS: usdc,
          ESCROW_ADDRESS: testWallets.escrow.address,
          CHECKOUT_ESCROW_ADDRESS: testWallets.checkoutEscrow.address,
        }),
      ),
    );
    stops.push(() => checkout.stop());
    const notifier = await startNotifier(notifierConfig(env.envFor('notifier', common)));
    stops.push(() => notifier.stop());

    /** The seller's checkout setting, as the registry publishes it; resolves once both services hold it. */
    let revision = 0;
    const setMode = async (mode: Mode) => {
      revision++;
      await publish(
        bus,
        'seller.updated',
        'registry',
        sellerUpdated({
          sellerId,
          revision,
          publishableKey,
          walletAddress: testWallets.seller.address,
          payoutAddress: testWallets.seller.address,
          webhookUrl: receiver.url,
          checkoutMatching: mode,
        }),
      );
      await waitFor(
        async () =>
          (await notifier.ctx.db
            .selectFrom('sellers')
            .select('seller_id')
            .where('seller_id', '=', sellerId)
            .executeTakeFirst()) &&
          (
            await checkout.ctx.db
              .selectFrom('sellers')
              .select('revision')
              .where('seller_id', '=', sellerId)
              .executeTakeFirst()
          )?.revision === revision,
        { message: `seller (${mode}) projected by checkout and notifier` },
      );
    };

    // First sight of each block, polled every 5 ms.
    const blockSeenAt = new Map<number, number>();
    let polling = false;
    blockWatcher = setInterval(async () => {
      if (polling) return;
      polling = true;
      try {
        const number = Number.parseInt(await rpc<string>(anvil.rpcUrl, 'eth_blockNumber', []), 16);
        if (!blockSeenAt.has(number)) blockSeenAt.set(number, performance.now());
      } catch {
        // the next poll will see it
      } finally {
        polling = false;
      }
    }, 5);

    // Webhook arrival per session, from the payment.confirmed body.
    const webhookAt = new Map<string, number>();
    receiver.respond = (request) => {
      const at = performance.now();
      const body = JSON.parse(request.body) as { event: string; data: { sessionId?: string } };
      if (body.event === 'payment.confirmed' && body.data.sessionId) webhookAt.set(body.data.sessionId, at);
      return 200;
    };

    // transfer.observed arrival per tx hash (a core subscription hears JetStream publishes).
    const observedAt = new Map<string, number>();
    const observed = bus.nc.subscribe(bus.subjectFor('transfer.observed'), {
      callback: (_error, message) => {
        const event = JSON.parse(new TextDecoder().decode(message.data)) as { data: { txHash: string } };
        if (!observedAt.has(event.data.txHash.toLowerCase()))
          observedAt.set(event.data.txHash.toLowerCase(), performance.now());
      },
    });
    stops.push(() => observed.unsubscribe());

    const samples: Sample[] = [];
    const widget = await WidgetSocket.open(notifier.url);
    stops.push(() => widget.close());
    const paidAt = new Map<string, number>();
    widget.socket.on('message', (data) => {
      const message = JSON.parse(data.toString());
      if (
        message.type === 'session' &&
        message.session.status === 'paid' &&
        !paidAt.has(message.session.sessionId)
      ) {
        paidAt.set(message.session.sessionId, performance.now());
      }
    });

    for (const mode of MODES) {
      await setMode(mode);
      for (let round = 0; round < ROUNDS; round++) {
        const sessions: Array<{
          sessionId: string;
          exactAmount: string;
          walletAddress: string;
          matching: string;
        }> = [];
        for (let i = 0; i < PER_BLOCK; i++) {
          const response = await fetch(`${checkout.url}/api/v1/checkout/sessions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${secretKey}`, 'content-type': 'application/json' },
            body: JSON.stringify({ amount: '2.5', description: `bench ${round}.${i}` }),
          });
          if (response.status !== 201)
            throw new Error(`session create: ${response.status} ${await response.text()}`);
          const session = (await response.json()) as (typeof sessions)[number];
          if (session.matching !== mode)
            throw new Error(`session matched by ${session.matching}, not ${mode}`);
          sessions.push(session);
          widget.send({ type: 'subscribe', sessionId: session.sessionId });
        }
        await waitFor(() => sessions.every((s) => widget.sessionMessages(s.sessionId).length >= 1), {
          message: `widget has the open sessions: ${JSON.stringify(widget.messages.slice(-4))}`,
        });
        // Submit just after a block so all transfers land together in the next one.
        const head = Math.max(...blockSeenAt.keys());
        await waitFor(() => blockSeenAt.has(head + 1), { timeoutMs: 5000, message: 'next block' });
        // anvil's dev accounts are unlocked; nonces are assigned here so the transfers can go out at once.
        const nonce = Number.parseInt(
          await rpc<string>(anvil.rpcUrl, 'eth_getTransactionCount', [testWallets.buyer.address, 'pending']),
          16,
        );
        const hashes = await Promise.all(
          sessions.map((s, i) =>
            rpc<string>(anvil.rpcUrl, 'eth_sendTransaction', [
              {
                from: testWallets.buyer.address,
                to: usdc,
                nonce: `0x${(nonce + i).toString(16)}`,
                // Where the session says: the checkout wallet (amount) or its own address, never the agent escrow.
                data: transferCalldata(s.walletAddress, microOf(s.exactAmount)),
              },
            ]),
          ),
        );
        await waitFor(() => sessions.every((s) => paidAt.has(s.sessionId) && webhookAt.has(s.sessionId)), {
          timeoutMs: 15_000,
          message: `${mode} round ${round}: every session paid over WebSocket and webhook`,
        });
        for (const [i, s] of sessions.entries()) {
          const receipt = await rpc<{ blockNumber: string }>(anvil.rpcUrl, 'eth_getTransactionReceipt', [
            hashes[i],
          ]);
          const block = Number.parseInt(receipt.blockNumber, 16);
          const minedAt = blockSeenAt.get(block);
          if (minedAt === undefined) throw new Error(`block ${block} was not observed`);
          samples.push({
            mode,
            sessionId: s.sessionId,
            block,
            observedMs: (observedAt.get((hashes[i] as string).toLowerCase()) ?? Number.NaN) - minedAt,
            websocketMs: (paidAt.get(s.sessionId) as number) - minedAt,
            webhookMs: (webhookAt.get(s.sessionId) as number) - minedAt,
          });
          widget.send({ type: 'unsubscribe', sessionId: s.sessionId });
        }
        process.stdout.write(
          `${mode} round ${round + 1}/${ROUNDS}: ${samples
            .slice(-PER_BLOCK)
            .map((s) => `${Math.round(s.websocketMs)}/${Math.round(s.webhookMs)}`)
            .join(' ')} ms\n`,
        );
      }
    }

    const observedSummary = summary(samples.map((s) => s.observedMs).filter((v) => !Number.isNaN(v)));
    const websocket = summary(samples.map((s) => s.websocketMs));
    const webhook = summary(samples.map((s) => s.webhookMs));
    const byMode = Object.fromEntries(
      MODES.map((mode) => {
        const of = samples.filter((s) => s.mode === mode);
        return [
          mode,
          {
            samples: of.length,
            websocket: summary(of.map((s) => s.websocketMs)),
            webhook: summary(of.map((s) => s.webhookMs)),
          },
        ];
      }),
    ) as Record<
      Mode,
      { samples: number; websocket: ReturnType<typeof summary>; webhook: ReturnType<typeof summary> }
    >;
    const result = {
      benchmark: 'latency',
      description:
        'Time from the block carrying a checkout payment being mined to the widget WebSocket message (status paid) and to the payment.confirmed webhook arriving, for sessions matched by unique amount (checkout wallet) and by deposit address.',
      generatedAt: new Date().toISOString(),
      setup: {
        chain: 'anvil',
        blockTimeMs: BLOCK_TIME_MS,
        confirmations: 1,
        indexerPollIntervalMs: 100,
        paymentsPerBlock: PER_BLOCK,
        services: ['chain-indexer', 'checkout', 'notifier'],
        host: { cpus: os.cpus().length, node: process.version },
      },
      samples: samples.length,
      transferObserved: observedSummary,
      websocket,
      webhook,
      byMode,
      targetP99Ms: TARGET_P99_MS,
      pass: websocket.p99Ms <= TARGET_P99_MS && webhook.p99Ms <= TARGET_P99_MS,
    };
    mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
    writeFileSync(path.join(ROOT, 'bench/results/latency.json'), `${JSON.stringify(result, null, 2)}\n`);
    writeDocsSection(result);
    process.stdout.write(
      `${JSON.stringify({ transferObserved: observedSummary, websocket, webhook, byMode, pass: result.pass })}\n`,
    );
  } finally {
    if (blockWatcher) clearInterval(blockWatcher);
    for (const stop of stops.reverse()) await Promise.resolve(stop()).catch(() => undefined);
    await anvil.stop();
    await env.cleanup();
  }
}

function writeDocsSection(result: {
  generatedAt: string;
  samples: number;
  transferObserved: ReturnType<typeof summary>;
  websocket: ReturnType<typeof summary>;
  webhook: ReturnType<typeof summary>;
  byMode: Record<
    Mode,
    { samples: number; websocket: ReturnType<typeof summary>; webhook: ReturnType<typeof summary> }
  >;
  targetP99Ms: number;
  pass: boolean;
  setup: { paymentsPerBlock: number; host: { cpus: number; node: string } };
}): void {
  const file = path.join(ROOT, 'docs/benchmarks.md');
  const start = '<!-- latency:start -->';
  const end = '<!-- latency:end -->';
  const row = (name: string, s: ReturnType<typeof summary>) =>
    `| ${name} | ${s.p50Ms} | ${s.p99Ms} | ${s.maxMs} | ${s.meanMs} |`;
  const section = [
    start,
    '## Payment latency: block mined to widget and webhook',
    '',
    '`npx tsx bench/latency/run.ts` (part of `make bench`) -> `bench/results/latency.json`.',
    '',
    `anvil with 1-second blocks and TestUSDC; chain-indexer (1 confirmation, 100 ms head poll), checkout and`,
    `notifier in one process on real Postgres and NATS JetStream; ${result.setup.paymentsPerBlock} checkout payments per block,`,
    `${result.samples} payments in all, half of them to sessions matched by unique amount (paid to the checkout wallet),`,
    `half to sessions at a deposit address each; host: ${result.setup.host.cpus} CPUs (shared), Node ${result.setup.host.node}.`,
    'Measured from the moment a 5 ms `eth_blockNumber` poll first sees the block with the transfer to the',
    "widget's WebSocket `session` message with status `paid`, and to the seller's `payment.confirmed` webhook",
    'arriving at a local HTTP receiver.',
    '',
    '| path | p50 ms | p99 ms | max ms | mean ms |',
    '|---|---|---|---|---|',
    row('block -> transfer.observed on the bus (chain-indexer, for reference)', result.transferObserved),
    row('block -> WebSocket message', result.websocket),
    row('block -> webhook arrival', result.webhook),
    row('unique amount: block -> WebSocket message', result.byMode.amount.websocket),
    row('unique amount: block -> webhook arrival', result.byMode.amount.webhook),
    row('deposit address: block -> WebSocket message', result.byMode.deposit_address.websocket),
    row('deposit address: block -> webhook arrival', result.byMode.deposit_address.webhook),
    '',
    `Target: p99 within one block time plus 300 ms (${result.targetP99Ms} ms): **${result.pass ? 'met' : 'not met'}**.`,
    `Measured ${result.generatedAt}.`,
    end,
  ].join('\n');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    text = '# Benchmarks\n';
  }
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  text =
    from >= 0 && to > from
      ? `${text.slice(0, from)}${section}${text.slice(to + end.length)}`
      : `${text.trimEnd()}\n\n${section}\n`;
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`latency benchmark failed: ${(error as Error).stack ?? error}\n`);
    process.exit(1);
  },
);
