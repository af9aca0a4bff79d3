/**
 * The ledger reconciles with the chain by itself (RECONCILE_INTERVAL_MS), so the alerts on its gauges fire without
 * an operator asking: USDC that reaches the escrow wallet and that the ledger never booked shows as a difference,
 * with both balances, within a pass. Real anvil, Postgres and NATS.
 */
import { usdcAbi } from '@paygate/chain';
import {
  type AnvilInstance,
  deployTestUsdc,
  fundTestWallets,
  minedReceipt,
  startAnvil,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract } from 'ethers';
import { sql } from 'kysely';
import { type LedgerHarness, OPERATOR_TOKEN, startLedgerHarness } from './helpers';

describe('periodic reconciliation', () => {
  let anvil: AnvilInstance;
  let h: LedgerHarness;
  let usdcAddress: string;

  beforeAll(async () => {
    anvil = await startAnvil();
    usdcAddress = (await deployTestUsdc(anvil.rpcUrl)).address;
    await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress, amountMicro: 5_000_000n, roles: ['buyer'] });
    h = await startLedgerHarness('reconwatch', {
      CHAIN_RPC_URL: anvil.rpcUrl,
      USDC_ADDRESS: usdcAddress,
      RECONCILE_INTERVAL_MS: '200',
    });
  });

  afterAll(async () => {
    await h?.stop();
    await anvil?.stop();
  });

  /** The value of a gauge (the service label only) on /metrics, or undefined while it has none. */
  async function gauge(name: string): Promise<number | undefined> {
    const text = await (await fetch(`${h.ledger.url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name}{`));
    return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
  }

  it('sets the gauges every pass, and reports USDC on chain that the ledger never booked', async () => {
    await waitFor(async () => (await gauge('ledger_reconciliation_last_success_timestamp_seconds')) ?? 0, {
      message: 'a first reconciliation without an operator asking',
    });
    expect(await gauge('ledger_reconciliation_differences')).toBe(0);
    expect(await gauge('ledger_escrow_chain_balance_micro_usdc')).toBe(0);
    expect(await gauge('ledger_escrow_ledger_balance_micro_usdc')).toBe(0);
    expect(await gauge('ledger_sellers_owed_micro_usdc')).toBe(0);
    expect(await gauge('ledger_sellers_uncovered_micro_usdc')).toBe(0);

    // Straight to escrow on chain; nothing publishes it to the ledger (no indexer here).
    const usdc = new Contract(usdcAddress, usdcAbi, testSigner('buyer', anvil.provider));
    await minedReceipt(await usdc.getFunction('transfer')(testWallets.escrow.address, 1_250_000n));

    await waitFor(async () => (await gauge('ledger_reconciliation_differences')) === 1, {
      message: 'the unbooked transfer reported as a difference',
    });
    expect(await gauge('ledger_escrow_chain_balance_micro_usdc')).toBe(1_250_000);
    expect(await gauge('ledger_escrow_ledger_balance_micro_usdc')).toBe(0);
  });

  it("serves the bus and readiness gauges the alerts read, for the service's own consumers", async () => {
    const text = async () =>
      (await fetch(`${h.ledger.url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
    expect((await fetch(`${h.ledger.url}/readyz`, { signal: AbortSignal.timeout(5000) })).status).toBe(200);
    const metrics = await text();
    expect(metrics).toMatch(/^service_ready\{[^}]*\} 1$/m);
    expect(metrics).toMatch(
      /^bus_consumer_pending_messages\{[^}]*consumer="ledger-transfer-observed"[^}]*\} 0$/m,
    );
    expect(metrics).toMatch(/^bus_dead_letter_messages\{[^}]*consumer="ledger-transfer-observed"[^}]*\} 0$/m);
    // Only its own consumers: settlement's are settlement's to report.
    expect(metrics).not.toMatch(/consumer="settlement-/);

    // An event that can never be valid goes straight to the consumer's dead letters: counted there.
    await h.bus.js.publish(h.bus.subjectFor('payment.call_failed'), new TextEncoder().encode('not an event'));
    await waitFor(
      async () =>
        /^bus_dead_letter_messages\{[^}]*consumer="ledger-payment-call-failed"[^}]*\} 1$/m.test(await text()),
      { message: 'the dead letter counted' },
    );
  });

  it('reports an account whose balance differs from its postings (the sum of postings is a numeric)', async () => {
    // Only a broken trigger or a hand edit could do this: the balance moved without a posting.
    await sql`select ledger_account('suspense', '')`.execute(h.ledger.ctx.db);
    await sql`update accounts set balance_micro = balance_micro + 7 where kind = 'suspense' and owner = ''`.execute(
      h.ledger.ctx.db,
    );
    const res = await fetch(`${h.ledger.url}/api/v1/reconciliation`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
      signal: AbortSignal.timeout(10_000),
    });
    expect(res.status).toBe(200);
    const report = (await res.json()) as { differences: Array<{ check: string; difference: string }> };
    expect(report.differences).toContainEqual(
      expect.objectContaining({ check: 'account suspense balance vs its postings', difference: '-0.000007' }),
    );
  });
});
