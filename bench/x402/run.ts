/**
 * x402 benchmark: an x402 payment (EIP-3009 authorization in PAYMENT-SIGNATURE) presented → the paid answer,
 * split into Paygate's verification (checks, signature, balance, claim), the relayer's simulation, submission
 * (sign, record, broadcast) and inclusion (waiting for the block), from the Server-Timing header; beside it, in
 * the same run, Paygate's own tx-hash proof (X-402-Payment) presented → answer, for a transfer already mined.
 *
 * Real parts: anvil with 1-second blocks and TestUSDC, Postgres, NATS JetStream, gateway-proxy, escrow-ledger
 * (the transfer claims) and settlement (with its relayer) in this process, a seller API on loopback.
 * Targets: Paygate's own work before submission p50 ≤ 10 ms; the whole x402 call within
 * one block plus 300 ms (p99 ≤ 1,300 ms on 1 s blocks). The reference facilitator publishes 200–500 ms for verify.
 *
 * Then Paygate's facilitator routes beside the unmodified reference facilitator on the same chain (reference.ts):
 * verify, one settle, ten concurrent settles; target: Paygate at or below the reference in every case.
 *
 * Run: `pnpm exec tsx bench/x402/run.ts` (env: X402_ROUNDS, default 30; X402_COMPARE_ROUNDS, default 10;
 * X402_DEBUG=1 prints each facilitator settle with its Server-Timing; X402_LEDGER=memory answers the claims in process).
 * Writes bench/results/x402.json and the x402 section of docs/benchmarks.md.
 */
import os from 'node:os';
import { encodePaymentHeader, type PaymentProof, resourceFor, signPayment } from '@paygate/agent-client';
import { encodeX402Header } from '@paygate/gateway-proxy';
import { skillSnapshot, startHarness, startUpstream } from '@paygate/gateway-proxy/test/harness';
import { formatUsdc } from '@paygate/money';
import { loadConfig as registryConfig, startRegistry } from '@paygate/registry';
import { DEFAULT_DATABASE_LIMITS } from '@paygate/runtime';
import { loadConfig as settlementConfig, startSettlement } from '@paygate/settlement';
import {
  findFreePort,
  signTransferAuthorization,
  signUpSeller,
  startServiceProcess,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { percentile, writeDocSection, writeResults } from '../report';
import { compareFacilitators, startReferenceFacilitator, watchHeads } from './reference';

const ROUNDS = Number(process.env.X402_ROUNDS ?? 30);
const COMPARE_ROUNDS = Number(process.env.X402_COMPARE_ROUNDS ?? 10);
/** Who answers the transfer claims: escrow-ledger (default) or `memory` (this process, the gateway alone). */
const X402_LEDGER = process.env.X402_LEDGER ?? 'ledger';
/** Paygate relayer's default receipt poll; the reference's viem client polls as often. */
const RECEIPT_POLL_MS = 20;
const BLOCK_TIME_MS = 1000;
const PRICE_MICRO = 50_000n;

interface Timed {
  totalMs: number;
  verifyMs: number;
  simulateMs: number;
  submitMs: number;
  includeMs: number;
}

function serverTiming(header: string | null): Record<string, number> {
  const out: Record<string, number> = {};
  for (const part of (header ?? '').split(',')) {
    const match = /^\s*([a-z]+);dur=([0-9.]+)/.exec(part);
    if (match) out[match[1]!] = Number(match[2]);
  }
  return out;
}

const stats = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const round = (v: number) => Math.round(v * 10) / 10;
  return {
    p50Ms: round(percentile(sorted, 50)),
    p90Ms: round(percentile(sorted, 90)),
    p99Ms: round(percentile(sorted, 99)),
    maxMs: round(sorted.at(-1) ?? Number.NaN),
  };
};

/**
 * The services' Postgres pools as deployed (DEFAULT_DATABASE_LIMITS: 10 connections kept 30 s), not the test
 * suites' 4 connections dropped after 1 s idle (which made a burst of ten re-open connections).
 */
const PRODUCTION_POOL = {
  DB_POOL_SIZE: String(DEFAULT_DATABASE_LIMITS.poolSize),
  DB_IDLE_TIMEOUT_MS: String(DEFAULT_DATABASE_LIMITS.idleTimeoutMs),
};

/** escrow-ledger as its own process (its main.ts under tsx) on this run's schema and bus, once it is ready. */
async function startLedgerProcess(h: Awaited<ReturnType<typeof startHarness>>) {
  return startServiceProcess(
    'escrow-ledger',
    await findFreePort(),
    h.env.envFor('escrow-ledger', {
      LOG_LEVEL: 'warn',
      CHAIN_RPC_URL: h.anvil.rpcUrl,
      USDC_ADDRESS: h.usdcAddress,
      ESCROW_ADDRESS: testWallets.escrow.address,
      CONFIRMATIONS: '1',
      ...PRODUCTION_POOL,
    }),
  );
}

async function main(): Promise<void> {
  const h = await startHarness(
    'benchx402',
    { RATE_LIMIT_PER_MINUTE: '100000', CONFIRMATIONS: '1', LOG_LEVEL: 'warn', ...PRODUCTION_POOL },
    { blockTimeSec: 1, claims: X402_LEDGER === 'memory' ? 'memory' : 'ledger' },
  );
  // The transfer claims answered by escrow-ledger itself (Postgres, as in production), so a settle's figure
  // includes the claim that makes one transfer buy one thing; as its own process, as deployed (in this process
  // its claims waited behind the gateway's and the relayer's work on one event loop). X402_LEDGER=memory answers
  // them in this process.
  const ledger = X402_LEDGER === 'memory' ? undefined : await startLedgerProcess(h);
  const upstream = await startUpstream();
  const settlement = await startSettlement(
    settlementConfig(
      h.env.envFor('settlement', {
        CHAIN_RPC_URL: h.anvil.rpcUrl,
        CHAIN_NETWORK: 'local',
        USDC_ADDRESS: h.usdcAddress,
        ESCROW_PRIVATE_KEY: testWallets.escrow.privateKey,
        RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey,
        CONFIRMATIONS: '1',
        SCHEDULER_INTERVAL_MS: '3600000',
        RELAYER_RECEIPT_POLL_MS: String(RECEIPT_POLL_MS),
        RELAYER_WS_URL: h.anvil.rpcUrl.replace(/^http/, 'ws'),
        ...PRODUCTION_POOL,
      }),
    ),
  );
  const registry = await startRegistry(
    registryConfig(h.env.envFor('registry', { PUBLIC_BASE_URL: 'http://paygate.test', LOG_LEVEL: 'warn' })),
  );
  const reference = await startReferenceFacilitator({
    rpcUrl: h.anvil.rpcUrl,
    chainId: h.anvil.chainId,
    // Its own gas key (anvil's funded deployer), so the two never share a nonce sequence.
    privateKey: testWallets.deployer.privateKey,
    pollingIntervalMs: RECEIPT_POLL_MS,
  });
  try {
    await h.publishSkill(skillSnapshot({ name: 'bench', apiBaseUrl: `${upstream.url}/seller` }));
    await waitFor(() => h.gateway.state.x402.offered(), { timeoutMs: 15_000, message: 'x402 offered' });
    const url = `${h.gateway.url}/api/v1/skills/bench/data`;
    const buyer = testSigner('buyer', h.anvil.provider);
    const x402: Timed[] = [];
    const proof: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // x402: the client signs, Paygate verifies, the relayer submits, the answer waits for the block.
      const signed = await signTransferAuthorization(buyer, {
        chainId: h.anvil.chainId,
        usdcAddress: h.usdcAddress,
        to: testWallets.escrow.address,
        valueMicro: PRICE_MICRO,
      });
      const header = encodeX402Header({
        x402Version: 2,
        accepted: {
          scheme: 'exact',
          network: `eip155:${h.anvil.chainId}`,
          amount: PRICE_MICRO.toString(),
          asset: h.usdcAddress,
          payTo: testWallets.escrow.address,
          maxTimeoutSeconds: 60,
        },
        payload: signed,
      });
      let started = performance.now();
      let res = await fetch(url, { headers: { 'PAYMENT-SIGNATURE': header } });
      const totalMs = performance.now() - started;
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`x402 round ${round}: ${res.status}`);
      const t = serverTiming(res.headers.get('server-timing'));
      x402.push({
        totalMs,
        verifyMs: t.verify ?? Number.NaN,
        simulateMs: t.simulate ?? Number.NaN,
        submitMs: t.submit ?? Number.NaN,
        includeMs: t.include ?? Number.NaN,
      });

      // Paygate's tx-hash proof: the agent's transfer is already mined; presentation → answer.
      const txHash = await h.transfer('buyer', PRICE_MICRO);
      const payment: PaymentProof = {
        txHash,
        amount: formatUsdc(PRICE_MICRO),
        token: h.usdcAddress,
        network: 'local',
        from: testWallets.buyer.address,
        to: testWallets.escrow.address,
        signature: await signPayment(
          buyer,
          txHash,
          resourceFor('GET', 'http://paygate.test/api/v1/skills/bench/data'),
        ),
      };
      started = performance.now();
      res = await fetch(url, { headers: { 'X-402-Payment': encodePaymentHeader(payment) } });
      proof.push(performance.now() - started);
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`proof round ${round}: ${res.status}`);
      process.stdout.write(
        `round ${round + 1}/${ROUNDS}: x402 ${Math.round(totalMs)} ms (verify ${t.verify}, simulate ${t.simulate}, submit ${t.submit}, include ${t.include}); tx-hash proof ${Math.round(proof.at(-1)!)} ms\n`,
      );
    }
    const { apiKey } = await signUpSeller(registry.url, testWallets.seller.privateKey);
    const loadBefore = os.loadavg();
    const heads = await watchHeads(h.anvil.rpcUrl);
    const compared = await compareFacilitators(
      h,
      [
        {
          name: 'paygate',
          url: `${h.gateway.url}/api/v1/x402`,
          headers: { authorization: `Bearer ${apiKey}` },
        },
        { name: 'reference', url: reference.url, headers: {} },
      ],
      {
        verify: COMPARE_ROUNDS * 2,
        settle: COMPARE_ROUNDS,
        burst: Math.max(1, Math.ceil(COMPARE_ROUNDS / 2)),
      },
      BLOCK_TIME_MS,
      heads,
    ).finally(() => heads.close());
    const loadDuring = [loadBefore, os.loadavg()];
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
    const comparison = Object.fromEntries(
      (['verify', 'settle', 'burst'] as const).map((kind) => {
        const paygate = mean(compared.paygate[kind]);
        const ref = mean(compared.reference[kind]);
        return [
          kind,
          {
            paygateMeanMs: Math.round(paygate * 10) / 10,
            referenceMeanMs: Math.round(ref * 10) / 10,
            ratio: Math.round((paygate / ref) * 100) / 100,
            paygate: stats(compared.paygate[kind]),
            reference: stats(compared.reference[kind]),
          },
        ];
      }),
    ) as Record<
      'verify' | 'settle' | 'burst',
      {
        paygateMeanMs: number;
        referenceMeanMs: number;
        ratio: number;
        paygate: ReturnType<typeof stats>;
        reference: ReturnType<typeof stats>;
      }
    >;
    // Decided on the unrounded means: a rounded ratio of 1.00 (Paygate 552.6 ms against 550.3) is above, not at.
    const comparisonPass = (['verify', 'settle', 'burst'] as const).every(
      (kind) => mean(compared.paygate[kind]) <= mean(compared.reference[kind]),
    );
    // Apart from where the block cycle falls: each answer (a burst's last) after the head of its block.
    const afterBlock = Object.fromEntries(
      (['settle', 'burst'] as const).map((kind) => [
        kind,
        {
          paygateMeanMs: Math.round(mean(compared.afterBlock.paygate[kind]) * 10) / 10,
          referenceMeanMs: Math.round(mean(compared.afterBlock.reference[kind]) * 10) / 10,
        },
      ]),
    ) as Record<'settle' | 'burst', { paygateMeanMs: number; referenceMeanMs: number }>;

    // Paygate's own work before submission: its checks in the gateway and the relayer (no node call);
    // the simulation is the node's eth_estimateGas, reported beside it and in the sum below.
    const beforeSubmission = x402.map((s) => s.verifyMs);
    const beforeSubmissionWithSimulation = x402.map((s) => s.verifyMs + s.simulateMs);
    const result = {
      benchmark: 'x402',
      setup: {
        chain: 'anvil',
        blockTimeMs: BLOCK_TIME_MS,
        rounds: ROUNDS,
        host: { cpus: os.cpus().length, node: process.version, loadavg: os.loadavg() },
      },
      x402: {
        total: stats(x402.map((s) => s.totalMs)),
        verification: stats(x402.map((s) => s.verifyMs)),
        simulation: stats(x402.map((s) => s.simulateMs)),
        submission: stats(x402.map((s) => s.submitMs)),
        inclusion: stats(x402.map((s) => s.includeMs)),
        ownWorkBeforeSubmission: stats(beforeSubmission),
        beforeSubmissionWithSimulation: stats(beforeSubmissionWithSimulation),
      },
      txHashProof: { presentedToAnswer: stats(proof) },
      versusReference: {
        rounds: compared.rounds,
        burstSize: 10,
        receiptPollMs: RECEIPT_POLL_MS,
        loadavgBeforeAndAfter: loadDuring,
        ...comparison,
        afterBlock,
        pass: comparisonPass,
      },
      targets: {
        ownWorkBeforeSubmissionP50Ms: 10,
        totalP99Ms: BLOCK_TIME_MS + 300,
        versusReferenceRatio: 1,
      },
    };
    const pass =
      result.x402.ownWorkBeforeSubmission.p50Ms <= 10 &&
      result.x402.total.p99Ms <= BLOCK_TIME_MS + 300 &&
      comparisonPass;
    writeResults('x402', { ...result, pass });
    const r = result.x402;
    writeDocSection(
      'x402',
      `## x402 payment → answer (\`bench/x402\`)

An x402 payment (EIP-3009 authorization in \`PAYMENT-SIGNATURE\`) presented to a paid skill until the seller's answer,
on anvil with ${BLOCK_TIME_MS} ms blocks, ${ROUNDS} rounds, split by the gateway's \`Server-Timing\` header; beside it,
in the same run, Paygate's tx-hash proof (\`X-402-Payment\`, transfer already mined) presented until the answer.
Load average at the end: ${os
        .loadavg()
        .map((v) => v.toFixed(1))
        .join(' / ')}.

| part | p50 | p90 | p99 |
|---|---|---|---|
| **Paygate's own work before submission**: verification (gateway: requirements, EIP-712 signature, authorization claim; relayer: its lookup) — target p50 ≤ 10 ms | **${r.ownWorkBeforeSubmission.p50Ms} ms** | ${r.ownWorkBeforeSubmission.p90Ms} ms | ${r.ownWorkBeforeSubmission.p99Ms} ms |
| simulation (the node's \`eth_estimateGas\` of \`transferWithAuthorization\`) | ${r.simulation.p50Ms} ms | ${r.simulation.p90Ms} ms | ${r.simulation.p99Ms} ms |
| verification + simulation | ${r.beforeSubmissionWithSimulation.p50Ms} ms | ${r.beforeSubmissionWithSimulation.p90Ms} ms | ${r.beforeSubmissionWithSimulation.p99Ms} ms |
| submission (nonce, sign, record, broadcast) | ${r.submission.p50Ms} ms | ${r.submission.p90Ms} ms | ${r.submission.p99Ms} ms |
| inclusion (waiting for the next block) | ${r.inclusion.p50Ms} ms | ${r.inclusion.p90Ms} ms | ${r.inclusion.p99Ms} ms |
| **whole x402 call** (target p99 ≤ ${BLOCK_TIME_MS + 300} ms) | ${r.total.p50Ms} ms | ${r.total.p90Ms} ms | **${r.total.p99Ms} ms** |
| tx-hash proof presented → answer (same run) | ${result.txHashProof.presentedToAnswer.p50Ms} ms | ${result.txHashProof.presentedToAnswer.p90Ms} ms | ${result.txHashProof.presentedToAnswer.p99Ms} ms |

### Paygate's facilitator beside the reference facilitator

The unmodified reference facilitator (\`@x402/core\`'s \`x402Facilitator\` + \`@x402/evm\`'s exact scheme, a viem
account under viem's \`nonceManager\`, served over HTTP like x402's example facilitator, receipts polled every
${RECEIPT_POLL_MS} ms like Paygate's relayer) and Paygate's \`/api/v1/x402/verify\` and \`/settle\` (seller key,
credited into escrow; ${X402_LEDGER === 'memory' ? 'the transfer claims answered in this process (X402_LEDGER=memory), not by escrow-ledger' : 'each settle claims its transfer in escrow-ledger, its own process, before it answers'}), on the same anvil (${BLOCK_TIME_MS} ms blocks), for 0.01 USDC payments, order alternating per
round; each settle starts at the same random point of the block cycle for both sides. Ratio = Paygate's mean /
the reference's mean (target ≤ 1 in every case). Load average (1/5/15 min) before and after:
${loadDuring.map((l) => l.map((v) => v.toFixed(1)).join(' / ')).join(' → ')}.

| call | rounds | Paygate mean (p50 / p90) | reference mean (p50 / p90) | ratio |
|---|---|---|---|---|
${(
  [
    ['verify', 'verify', compared.rounds.verify],
    ['settle', 'one settle (until included)', compared.rounds.settle],
    ['burst', 'ten concurrent settles (until all included)', compared.rounds.burst],
  ] as const
)
  .map(
    ([kind, label, rounds]) =>
      `| ${label} | ${rounds} | ${comparison[kind].paygateMeanMs} ms (${comparison[kind].paygate.p50Ms} / ${comparison[kind].paygate.p90Ms}) | ${comparison[kind].referenceMeanMs} ms (${comparison[kind].reference.p50Ms} / ${comparison[kind].reference.p90Ms}) | **${comparison[kind].ratio.toFixed(2)}x** |`,
  )
  .join('\n')}

Answer after the head of the block that included the payment (the bench's own WebSocket subscription to anvil's
heads; a burst: its last answer), mean: one settle Paygate ${afterBlock.settle.paygateMeanMs} ms, reference
${afterBlock.settle.referenceMeanMs} ms; ten concurrent settles Paygate ${afterBlock.burst.paygateMeanMs} ms, reference
${afterBlock.burst.referenceMeanMs} ms. Paygate's relayer hears of new heads from anvil's WebSocket
(\`RELAYER_WS_URL\`) and polls the head every ${RECEIPT_POLL_MS} ms (densely when a block is due); the reference polls
every ${RECEIPT_POLL_MS} ms.

Targets ${pass ? 'met' : 'NOT met'}.`,
    );
    console.log(
      JSON.stringify({
        ...result.x402,
        txHashProof: result.txHashProof,
        versusReference: result.versusReference,
        pass,
      }),
    );
  } finally {
    await reference.close().catch(() => undefined);
    await registry.stop().catch(() => undefined);
    await settlement.stop().catch(() => undefined);
    await upstream.close().catch(() => undefined);
    await ledger?.kill().catch(() => undefined);
    await h.stop().catch(() => undefined);
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
