/**
 * Ledger throughput: payments booked per second by the one command that books them, `ledger.claim_transfer` with
 * its payment (claim + booking + payment.confirmed in one ledger transaction), asked over NATS as the gateway and
 * checkout ask it, 10% of them asked twice (a retry: answered with the first booking), then the ledger is checked
 * for exactly-once. Writes bench/results/ledger.json and the ledger section of docs/benchmarks.md. Run:
 * `npx tsx bench/ledger/run.ts` (BENCH_EVENTS to size it). Beside the consumer it replaced: baseline.ts.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { requestRpc } from '@paygate/bus';
import type { RpcRequest } from '@paygate/contracts';
import { loadConfig, reconcile, startEscrowLedger } from '@paygate/escrow-ledger';
import { formatUsdc, parseUsdc, splitFee } from '@paygate/money';
import { createTestEnvironment, openSchema, testWallets, waitFor } from '@paygate/testing';
import { sql } from 'kysely';
import { type LedgerResult, writeLedgerResult } from './report';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 20_000);
const REDELIVERED_FRACTION = 0.1;
const TARGET_PER_SECOND = 2000;
const SELLERS = 50;
/** Requests in flight at once (as many gateway and checkout replicas would keep asking). */
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 1000);

async function main() {
  const env = await createTestEnvironment('benchledger');
  const bus = await env.bus();
  const ledger = await startEscrowLedger(
    loadConfig(
      env.envFor('escrow-ledger', {
        OPERATOR_TOKEN: 'bench-operator-token-0000',
        RELEASE_INTERVAL_MS: '3600000',
        // Required by the config; the bench never reconciles with the chain.
        USDC_ADDRESS: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
        ESCROW_ADDRESS: testWallets.escrow.address,
        PAYMENT_BATCH_SIZE: process.env.BENCH_BATCH_SIZE ?? '200',
        PAYMENT_CONCURRENCY: process.env.BENCH_CONCURRENCY ?? '3',
        LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
      }),
    ),
  );
  const db = openSchema(env.schemaFor('escrow-ledger'));
  try {
    let expectedTotal = 0n;
    let expectedSeller = 0n;
    const requests = Array.from({ length: EVENTS }, (_, i): RpcRequest<'ledger.claim_transfer'> => {
      const amount = formatUsdc(1_000_000n + BigInt(i % 997) * 1_001n);
      expectedTotal += parseUsdc(amount);
      expectedSeller += splitFee(parseUsdc(amount)).sellerMicro;
      const checkout = i % 2 === 0;
      const txHash = `0x${randomBytes(32).toString('hex')}`;
      return {
        chainId: 31337,
        txHash,
        logIndex: i % 3,
        claimedVia: checkout ? 'checkout' : 'x402',
        reference: checkout ? `cs_bench_${i}` : `local:${txHash}`,
        payer: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
        amount,
        payment: {
          paymentId: `pay_bench_${i}`,
          source: checkout ? 'checkout' : 'x402',
          sellerId: `sel_bench_${i % SELLERS}`,
          skillId: null,
          skillName: null,
          endpointId: null,
          sessionId: checkout ? `cs_bench_${i}` : null,
          network: 'local',
          token: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
          holdPeriodHours: 24,
        },
      };
    });
    // 10% are asked a second time (a retry after a lost answer), interleaved with the first requests.
    const redelivered = requests.filter((_, i) => i % Math.round(1 / REDELIVERED_FRACTION) === 0);
    const messages = [...requests, ...redelivered];
    messages.sort((a, b) => (a.txHash < b.txHash ? -1 : a.txHash > b.txHash ? 1 : 0));

    const one = async (query: ReturnType<typeof sql<{ v: bigint | null }>>) =>
      (await query.execute(db)).rows[0]!.v ?? 0n;
    const loadBefore = os.loadavg();
    const started = process.hrtime.bigint();
    let next = 0;
    let refused = 0;
    // IN_FLIGHT askers, each asking its next request once its last was answered.
    await Promise.all(
      Array.from({ length: Math.min(IN_FLIGHT, messages.length) }, async () => {
        while (next < messages.length) {
          const request = messages[next++]!;
          const reply = await requestRpc(bus, 'ledger.claim_transfer', request, { timeoutMs: 60_000 });
          if (!reply.ok) refused += 1;
        }
      }),
    );
    const finished = process.hrtime.bigint();
    const seconds = Number(finished - started) / 1e9;
    // Answers come at each commit; the relay publishes the events after. Both figures, so a backlog shows.
    await waitFor(
      async () =>
        (await one(sql`select count(*)::bigint as v from outbox where published_at is null`)) === 0n,
      { timeoutMs: 120_000, intervalMs: 20 },
    );
    const publishedSeconds = Number(process.hrtime.bigint() - started) / 1e9;
    // The machine is shared: the load average says how much else was running while this was measured.
    const loadAfter = os.loadavg();

    const transactions = await one(sql`select count(*)::bigint as v from transactions`);
    const distinctTransfers = await one(
      sql`select count(distinct (chain_id, tx_hash, log_index))::bigint as v from transactions`,
    );
    const paymentEntries = await one(
      sql`select count(*)::bigint as v from journal_entries where entry_type = 'payment'`,
    );
    const held = await one(
      sql`select sum(balance_micro)::bigint as v from accounts where kind = 'seller_held'`,
    );
    const escrow = await one(sql`select balance_micro as v from accounts where kind = 'escrow_asset'`);
    const conflicts = await one(sql`select count(*)::bigint as v from payment_conflicts`);
    const confirmedEvents = await one(
      sql`select count(*)::bigint as v from outbox where subject = 'payment.confirmed'`,
    );
    const report = await reconcile(db, ledger.deps.config, expectedTotal);
    const exactlyOnce =
      transactions === BigInt(EVENTS) &&
      distinctTransfers === BigInt(EVENTS) &&
      paymentEntries === BigInt(EVENTS) &&
      held === expectedSeller &&
      escrow === expectedTotal &&
      conflicts === 0n &&
      refused === 0 &&
      confirmedEvents === BigInt(EVENTS) &&
      report.balanced;
    const perSecond = Math.round(EVENTS / seconds);
    const result: LedgerResult = {
      benchmark: 'ledger booking throughput (ledger.claim_transfer with its payment)',
      events: EVENTS,
      redeliveries: redelivered.length,
      deliveries: messages.length,
      seconds: Number(seconds.toFixed(2)),
      publishedSeconds: Number(publishedSeconds.toFixed(2)),
      inFlight: IN_FLIGHT,
      eventsPerSecond: perSecond,
      targetPerSecond: TARGET_PER_SECOND,
      meetsTarget: perSecond >= TARGET_PER_SECOND,
      batchSize: ledger.deps.config.paymentBatchSize,
      concurrency: ledger.deps.config.paymentConcurrency,
      exactlyOnce,
      checks: {
        transactions: transactions.toString(),
        distinctTransfers: distinctTransfers.toString(),
        paymentEntries: paymentEntries.toString(),
        sellerHeld: formatUsdc(held),
        expectedSellerHeld: formatUsdc(expectedSeller),
        escrowAsset: formatUsdc(escrow),
        expectedEscrowAsset: formatUsdc(expectedTotal),
        conflicts: conflicts.toString(),
        refused,
        paymentConfirmedEvents: confirmedEvents.toString(),
        reconciliationDifferences: report.differences.length,
      },
      loadAverage: {
        before: loadBefore.map((v) => Number(v.toFixed(2))),
        after: loadAfter.map((v) => Number(v.toFixed(2))),
      },
      machine: {
        host: os.hostname(),
        cpus: os.cpus().length,
        cpuModel: os.cpus()[0]?.model ?? 'unknown',
        node: process.version,
      },
      ranAt: new Date().toISOString(),
    };
    // baseline.ts runs this as one side of a pair and writes the results itself.
    if (!process.env.BENCH_NO_WRITE) writeLedgerResult(result);
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    if (!exactlyOnce) process.exitCode = 1;
  } finally {
    await db.destroy();
    await ledger.stop();
    await env.cleanup();
  }
}

main().catch((error) => {
  process.stderr.write(`${(error as Error).stack}\n`);
  process.exit(1);
});
