import type { Bus } from '@paygate/bus';
import { formatAddress, usdcAbi } from '@paygate/chain';
import {
  loadConfig as loadLedgerConfig,
  type RunningEscrowLedger,
  startEscrowLedger,
} from '@paygate/escrow-ledger';
import { parseUsdc } from '@paygate/money';
import { migrateToLatest } from '@paygate/runtime';
import {
  eventOf,
  fundTestWallets,
  type HarnessSetup,
  minedReceipt,
  openSchema,
  type ServiceHarness,
  startServiceHarness,
  TestClock,
  type TestEnvironment,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract } from 'ethers';
import { type Kysely, sql } from 'kysely';
import { migrations } from '../migrations';
import { loadConfig, type RunningSettlement, startSettlement } from '../src';
import type { SettlementDB } from '../src/db';
import {
  bookPayment,
  publishEvent,
  settlementEnv,
  startTestChain,
  type TestChain,
  TestLedger,
} from './helpers';

/** What a settlement test runs against: libs/testing's service harness with the chain and ledger settlement uses. */
export interface SettlementHarness extends ServiceHarness<RunningSettlement> {
  chain: TestChain;
  bus: Bus;
  /** The in-memory ledger answering settlement's ledger decisions (not with `escrowLedger`). */
  ledger: TestLedger;
  /** The real escrow-ledger, with `escrowLedger`, on the harness's clock and chain. */
  escrowLedger: RunningEscrowLedger;
  /** Its schema (read with raw SQL). */
  ledgerDb: Kysely<any>;
  /** The settlement schema. */
  db: Kysely<SettlementDB>;
  /** settlementEnv for this environment and chain, with this harness's overrides and then `extra`. */
  settlementEnv(extra?: Record<string, string>): NodeJS.ProcessEnv;
  /**
   * Starts settlement with `extra` settings on the harness's clock (with `start: false`, or again once the test
   * stopped `service`); `service` is then this one, and the harness stops it.
   */
  start(extra?: Record<string, string>): Promise<RunningSettlement>;
}

export interface SettlementHarnessOptions {
  /** USDC minted to the escrow wallet (default '100'; none when null). */
  escrowFunds?: string | null;
  /** USDC minted to the buyer wallet (default none). */
  buyerFunds?: string;
  /** settlementEnv overrides for the service this harness starts (and for `settlementEnv()`). */
  overrides?: Record<string, string>;
  /**
   * Settlement's business clock. Default: one ticking from now, as the relayer's authorization windows and the
   * chain's timestamps need; a test that moves days passes a clock that stands still.
   */
  clock?: TestClock;
  /**
   * false: settlement is not started yet (the test starts it with `start`, or runs it as a child process); its
   * schema is migrated instead so the test can read it from the start.
   */
  start?: boolean;
  /**
   * Runs the real escrow-ledger with these settings (on the chain and the harness's clock, watching the escrow
   * wallet) instead of the in-memory ledger: a test of what the two services decide together.
   */
  escrowLedger?: Record<string, string>;
}

/**
 * Settlement on anvil with TestUSDC (escrow funded), the in-memory ledger (or escrow-ledger) on the bus, started
 * with the overrides on the harness's clock, its schema open. Stopping it stops the settlement running then, the
 * schemas, the ledger, the chain, the environment.
 */
export async function startSettlementHarness(
  label: string,
  options: SettlementHarnessOptions = {},
): Promise<SettlementHarness> {
  const overrides = options.overrides ?? {};
  const clock = options.clock ?? new TestClock(Date.now(), { ticking: true });
  let parts:
    | {
        chain: TestChain;
        bus: Bus;
        ledger?: TestLedger;
        escrowLedger?: RunningEscrowLedger;
        ledgerDb?: Kysely<any>;
        db: Kysely<SettlementDB>;
      }
    | undefined;
  let running: RunningSettlement | undefined;
  const harness = await startServiceHarness(
    label,
    async ({ env, onStop }) => {
      const chain = await startTestChain(options.escrowFunds === undefined ? '100' : options.escrowFunds);
      onStop(() => chain.anvil.stop(), 'after');
      if (options.buyerFunds) {
        await fundTestWallets({
          rpcUrl: chain.anvil.rpcUrl,
          usdcAddress: chain.usdcAddress,
          amountMicro: parseUsdc(options.buyerFunds),
          roles: ['buyer'],
        });
      }
      const bus = await env.bus();
      parts = {
        chain,
        bus,
        ...(await startLedger(env, chain, onStop)),
        db: openSchema(env.schemaFor('settlement')),
      };
      const { db } = parts;
      onStop(() => db.destroy(), 'after');
      if (options.start === false) await migrateToLatest(db, env.schemaFor('settlement'), migrations);
      else running = await startWith(env, chain, {});
      // The settlement running now, whichever start made it.
      return {
        get url() {
          return running?.url ?? '';
        },
        stop: async () => running?.stop(),
      };
    },
    { clock },
  );
  async function startLedger(env: TestEnvironment, chain: TestChain, onStop: HarnessSetup['onStop']) {
    if (!options.escrowLedger) {
      const ledger = await new TestLedger().serve(await env.bus());
      onStop(() => ledger.stop(), 'after');
      return { ledger };
    }
    const escrowLedger = await startEscrowLedger({
      ...loadLedgerConfig(
        env.envFor('escrow-ledger', {
          CHAIN_RPC_URL: chain.anvil.rpcUrl,
          USDC_ADDRESS: chain.usdcAddress,
          ESCROW_ADDRESS: testWallets.escrow.address,
          // bookPayment claims as the gateway does, but no call is in flight behind it: payable after its hold
          // period alone (the call outcome window has its test in escrow-ledger's unserved-refunds.test.ts).
          CALL_OUTCOME_WINDOW_MS: '0',
          ...options.escrowLedger,
        }),
      ),
      now: clock.now,
    });
    onStop(() => escrowLedger.stop(), 'after');
    const ledgerDb = openSchema(env.schemaFor('escrow-ledger'));
    onStop(() => ledgerDb.destroy(), 'after');
    return { escrowLedger, ledgerDb };
  }
  function startWith(env: TestEnvironment, chain: TestChain, extra: Record<string, string>) {
    return startSettlement(loadConfig(settlementEnv(env, chain, { ...overrides, ...extra })), {
      now: clock.now,
    });
  }
  const { chain, bus, ledger, escrowLedger, ledgerDb, db } = parts!;
  const present = <T>(part: T | undefined, what: string): T => {
    if (part === undefined) throw new Error(`${label}: this harness runs no ${what}`);
    return part;
  };
  const h: SettlementHarness = {
    ...harness,
    chain,
    bus,
    get ledger() {
      return present(ledger, 'in-memory ledger (it runs escrow-ledger)');
    },
    get escrowLedger() {
      return present(escrowLedger, 'escrow-ledger (pass escrowLedger)');
    },
    get ledgerDb() {
      return present(ledgerDb, 'escrow-ledger (pass escrowLedger)');
    },
    db,
    get url() {
      return running?.url ?? '';
    },
    get service() {
      if (!running) throw new Error('settlement is not started: call start()');
      return running;
    },
    set service(service: RunningSettlement) {
      running = service;
    },
    settlementEnv: (extra = {}) => settlementEnv(harness.env, chain, { ...overrides, ...extra }),
    start: async (extra = {}) => {
      running = await startWith(harness.env, chain, extra);
      return running;
    },
  };
  return h;
}

/**
 * startSettlementHarness as the describe's beforeAll/afterAll. Read the fields inside tests (beforeAll sets them);
 * a test may set `service` to a settlement it started itself, which the afterAll then stops.
 */
export function useSettlementHarness(
  label: string,
  options: SettlementHarnessOptions = {},
): SettlementHarness {
  let started: SettlementHarness | undefined;
  const ready = () => {
    if (!started) throw new Error(`${label}: the settlement harness is read before its beforeAll`);
    return started;
  };
  beforeAll(async () => {
    started = await startSettlementHarness(label, options);
  });
  afterAll(async () => {
    await started?.stop();
  });
  return new Proxy({} as SettlementHarness, {
    get: (_target, key) => Reflect.get(ready(), key),
    set: (_target, key, value) => Reflect.set(ready(), key, value),
  });
}

/**
 * A payment into escrow as the other services see it, for a harness with `escrowLedger`: the payer's USDC transfer
 * mined, the indexer's transfer.observed, the gateway's claim booking it for the seller; the ledger's transactions
 * row once booked (once its hold is released too, with `released`).
 */
export async function payIntoEscrow(
  h: SettlementHarness,
  payment: {
    amount: string;
    sellerId: string;
    holdPeriodHours?: number;
    payer?: 'buyer' | 'stranger';
    released?: boolean;
  },
): Promise<any> {
  const role = payment.payer ?? 'buyer';
  const payer = testWallets[role].address;
  const usdc = new Contract(h.chain.usdcAddress, usdcAbi, testSigner(role, h.chain.anvil.provider));
  const receipt = await minedReceipt(
    await usdc.getFunction('transfer')(testWallets.escrow.address, parseUsdc(payment.amount)),
  );
  const common = {
    chainId: h.chain.anvil.chainId,
    network: 'local' as const,
    txHash: receipt.hash.toLowerCase(),
    logIndex: receipt.logs[0]!.index,
    token: formatAddress(h.chain.usdcAddress),
    amount: payment.amount,
  };
  await publishEvent(
    h.bus,
    eventOf('transfer.observed', {
      ...common,
      blockNumber: receipt.blockNumber,
      blockHash: receipt.blockHash,
      from: payer,
      to: testWallets.escrow.address,
      confirmations: 1,
      observedAt: h.clock.now().toISOString(),
    }),
  );
  await bookPayment(h.bus, {
    ...common,
    payer,
    sellerId: payment.sellerId,
    holdPeriodHours: payment.holdPeriodHours ?? 0,
  });
  return waitFor(
    async () => {
      const row = (
        await sql<any>`select * from transactions where tx_hash = ${common.txHash}`.execute(h.ledgerDb)
      ).rows[0];
      return (!payment.released || row?.escrow_status === 'available') && row;
    },
    {
      timeoutMs: 20_000,
      message: payment.released
        ? 'payment booked and released by the ledger'
        : 'payment booked by the ledger',
    },
  );
}
