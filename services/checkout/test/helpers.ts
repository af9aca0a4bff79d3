import { randomBytes } from 'node:crypto';
import { type Bus, encodeEnvelope } from '@paygate/bus';
import { createEvent, type EventData, type Subject } from '@paygate/contracts';
import type { RunningService } from '@paygate/runtime';
import {
  createTestEnvironment,
  serveSellersForTests,
  serveTransferClaimsForTests,
  TestClock,
  type TestEnvironment,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { loadConfig, startCheckout } from '../src';
import type { CheckoutDatabase } from '../src/db';

export const USDC = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
export const ESCROW = testWallets.escrow.address;
/** The checkout wallet every amount-matched session is paid to (checkout's default outside production). */
export const CHECKOUT_WALLET = testWallets.checkoutEscrow.address;
/** Both ways a seller's sessions can be matched, for suites that run their journeys in each. */
export const MATCHING_MODES = ['amount', 'deposit_address'] as const;
export type MatchingMode = (typeof MATCHING_MODES)[number];

export interface CheckoutHarness {
  env: TestEnvironment;
  bus: Bus;
  running: RunningService<CheckoutDatabase>;
  clock: TestClock;
  url: string;
  publishableKey: string;
  secretKey: string;
  sellerId: string;
  publish<S extends Subject>(type: S, data: EventData<S>, producer?: string): Promise<string>;
  /**
   * The payments the in-memory ledger booked with checkout's claims (what escrow-ledger publishes as
   * payment.confirmed), in payment.confirmed's terms; empty with `claims: 'ledger'` (read the ledger instead).
   */
  ledgerPayments(): Array<Omit<EventData<'payment.confirmed'>, 'confirmedAt'>>;
  stop(): Promise<void>;
}

/** A checkout service on real Postgres and NATS, a seller (both keys) and the seller's registry projections. */
export async function startHarness(
  label: string,
  extraEnv: Record<string, string> = {},
  /** claims: who answers `ledger.claim_transfer` (default `memory`: the contract's rule in this process). */
  options: { env?: TestEnvironment; claims?: 'memory' | 'ledger'; matching?: MatchingMode } = {},
): Promise<CheckoutHarness> {
  const env = options.env ?? (await createTestEnvironment(label));
  const bus = await env.bus();
  const claims =
    (options.claims ?? 'memory') === 'memory' ? await serveTransferClaimsForTests(bus) : undefined;
  const clock = new TestClock();
  const sellerId = `sel_${randomBytes(4).toString('hex')}`;
  const publishableKey = `pk_test_${randomBytes(12).toString('hex')}`;
  const secretKey = `sk_test_${randomBytes(12).toString('hex')}`;
  const responder = await serveSellersForTests(bus, {
    [secretKey]: {
      sellerId,
      walletAddress: testWallets.seller.address,
      payoutAddress: testWallets.seller.address,
      publishableKey,
      apiKeyVersion: 1,
    },
  });
  const config = loadConfig(
    env.envFor('checkout', {
      USDC_ADDRESS: USDC,
      ESCROW_ADDRESS: ESCROW,
      SWEEP_INTERVAL_MS: '100',
      ...extraEnv,
    }),
    clock.now,
  );
  const running = await startCheckout(config);
  const publish = async <S extends Subject>(type: S, data: EventData<S>, producer?: string) => {
    const owner = producer ?? (type.startsWith('transfer.') ? 'chain-indexer' : 'registry');
    const event = createEvent(type, owner as never, data);
    await bus.js.publish(bus.subjectFor(type), encodeEnvelope(event), { msgID: event.id });
    return event.id;
  };
  await publish('seller.updated', {
    sellerId,
    revision: 1,
    walletAddress: testWallets.seller.address,
    payoutAddress: testWallets.seller.address,
    publishableKey,
    apiKeyVersion: 1,
    webhookUrl: null,
    webhookSecretVersion: 0,
    settlementFrequency: 'DAILY',
    minimumSettlement: '10',
    ...(options.matching ? { checkoutMatching: options.matching } : {}),
    updatedAt: new Date().toISOString(),
  });
  await waitFor(
    () =>
      running.ctx.db
        .selectFrom('sellers')
        .select('seller_id')
        .where('seller_id', '=', sellerId)
        .executeTakeFirst(),
    { message: 'seller projection' },
  );
  return {
    env,
    bus,
    running,
    clock,
    url: running.url,
    publishableKey,
    secretKey,
    sellerId,
    publish,
    ledgerPayments: () =>
      (claims?.payments ?? []).map(({ payment, chainId, txHash, logIndex, payer, amount }) => ({
        ...payment,
        payer,
        amount,
        chainId,
        txHash,
        logIndex,
      })),
    async stop() {
      await responder.stop();
      await running.stop();
      await claims?.stop();
      if (!options.env) await env.cleanup();
    },
  };
}

export function skillEvent(
  h: CheckoutHarness,
  overrides: Partial<EventData<'skill.updated'>> & { name: string },
  prices: string[] = ['5'],
): EventData<'skill.updated'> {
  return {
    skillId: `sk_${overrides.name}`,
    sellerId: h.sellerId,
    revision: 1,
    displayName: `Skill ${overrides.name}`,
    description: 'a skill for checkout tests',
    type: 'Service',
    mode: 'PROXY',
    status: 'ACTIVE',
    apiBaseUrl: 'https://seller.example',
    categories: [],
    durationDays: null,
    requiresShipping: null,
    holdPeriodHours: 48,
    endpoints: prices.map((price, i) => ({
      endpointId: `ep_${overrides.name}_${i}`,
      path: `/item-${i}`,
      method: 'POST',
      description: `item ${i}`,
      price,
      isHealthy: true,
      active: true,
    })),
    updatedAt: new Date().toISOString(),
    ...overrides,
  };
}

export async function publishSkill(h: CheckoutHarness, event: EventData<'skill.updated'>): Promise<void> {
  await h.publish('skill.updated', event);
  await waitFor(
    async () =>
      (
        await h.running.ctx.db
          .selectFrom('skills')
          .select('revision')
          .where('skill_id', '=', event.skillId)
          .executeTakeFirst()
      )?.revision === event.revision,
    { message: 'skill projection' },
  );
}

let txCounter = 0;
export function transferEvent(
  amount: string,
  overrides: Partial<EventData<'transfer.observed'>> = {},
): EventData<'transfer.observed'> {
  txCounter++;
  return {
    chainId: 31337,
    network: 'local',
    txHash: `0x${randomBytes(32).toString('hex')}`,
    logIndex: 0,
    blockNumber: 100 + txCounter,
    blockHash: `0x${randomBytes(32).toString('hex')}`,
    from: testWallets.buyer.address,
    to: CHECKOUT_WALLET,
    token: USDC,
    amount,
    confirmations: 1,
    observedAt: new Date().toISOString(),
    ...overrides,
  };
}
