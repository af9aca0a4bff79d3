import type { Bus } from '@paygate/bus';
import { parseUsdc } from '@paygate/money';
import { migrateToLatest } from '@paygate/runtime';
import { createTestEnvironment, fundTestWallets, openSchema, type TestEnvironment } from '@paygate/testing';
import type { Kysely } from 'kysely';
import { migrations } from '../migrations';
import { loadConfig, type RunningSettlement, startSettlement } from '../src';
import type { SettlementDB } from '../src/db';
import { settlementEnv, startTestChain, type TestChain, TestLedger } from './helpers';

/** What a settlement test runs against; `service` is set once started. */
export interface SettlementHarness {
  env: TestEnvironment;
  chain: TestChain;
  bus: Bus;
  /** The in-memory ledger answering settlement's ledger RPCs. */
  ledger: TestLedger;
  /** The settlement schema. */
  db: Kysely<SettlementDB>;
  service: RunningSettlement;
  /** settlementEnv for this environment and chain, with this harness's overrides and then `extra`. */
  settlementEnv(extra?: Record<string, string>): NodeJS.ProcessEnv;
}

export interface SettlementHarnessOptions {
  /** USDC minted to the escrow wallet (default '100'; none when null). */
  escrowFunds?: string | null;
  /** USDC minted to the buyer wallet (default none). */
  buyerFunds?: string;
  /** settlementEnv overrides for the service this harness starts (and for `settlementEnv()`). */
  overrides?: Record<string, string>;
  /**
   * false: settlement is not started in this process (a test that runs it as a child process); its schema is
   * migrated instead so the test can read it from the start.
   */
  start?: boolean;
}

/**
 * The setup settlement's tests share, registered as the describe's beforeAll/afterAll: a test environment named
 * `name`, anvil with TestUSDC (escrow funded), the in-memory ledger on the bus, settlement started with the
 * overrides, its schema open. Read the fields inside tests (they are set by beforeAll).
 */
export function useSettlementHarness(
  name: string,
  options: SettlementHarnessOptions = {},
): SettlementHarness {
  const h = {} as SettlementHarness;
  const overrides = options.overrides ?? {};
  beforeAll(async () => {
    h.env = await createTestEnvironment(name);
    h.chain = await startTestChain(options.escrowFunds === undefined ? '100' : options.escrowFunds);
    if (options.buyerFunds) {
      await fundTestWallets({
        rpcUrl: h.chain.anvil.rpcUrl,
        usdcAddress: h.chain.usdcAddress,
        amountMicro: parseUsdc(options.buyerFunds),
        roles: ['buyer'],
      });
    }
    h.settlementEnv = (extra = {}) => settlementEnv(h.env, h.chain, { ...overrides, ...extra });
    h.bus = await h.env.bus();
    h.ledger = await new TestLedger().serve(h.bus);
    if (options.start !== false) h.service = await startSettlement(loadConfig(h.settlementEnv()));
    h.db = openSchema<SettlementDB>(h.env.schemaFor('settlement'));
    if (options.start === false) await migrateToLatest(h.db, h.env.schemaFor('settlement'), migrations);
  });
  afterAll(async () => {
    await h.service?.stop();
    await h.ledger?.stop();
    await h.db?.destroy();
    await h.chain?.anvil.stop();
    await h.env?.cleanup();
  });
  return h;
}
