import { randomBytes } from 'node:crypto';
import { type Bus, encodeEnvelope } from '@paygate/bus';
import type { EventData, ServiceName, Subject } from '@paygate/contracts';
import type { RunningService } from '@paygate/runtime';
import {
  type ServiceHarness,
  serveSellersForTests,
  serveTransferClaimsForTests,
  startServiceHarness,
  type TestEnvironment,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { eventDataOf, eventOf } from '@paygate/testing/events';
import { loadConfig, startCheckout } from '../src';
import type { CheckoutDatabase } from '../src/db';

export const USDC = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
export const ESCROW = testWallets.escrow.address;
/** The checkout wallet every amount-matched session is paid to (checkout's default outside production). */
export const CHECKOUT_WALLET = testWallets.checkoutEscrow.address;
/** Both ways a seller's sessions can be matched, for suites that run their journeys in each. */
export const MATCHING_MODES = ['amount', 'deposit_address'] as const;
export type MatchingMode = (typeof MATCHING_MODES)[number];

export interface CheckoutHarness extends ServiceHarness<RunningService<CheckoutDatabase>> {
  /** The same as `service` (bench/checkout/run.ts reads it). */
  running: RunningService<CheckoutDatabase>;
  bus: Bus;
  publishableKey: string;
  secretKey: string;
  sellerId: string;
  /** Publishes an event of `type` (by the subject's first owner unless `producer` is given); its id. */
  publish<S extends Subject>(type: S, data: EventData<S>, producer?: ServiceName): Promise<string>;
  /**
   * The payments the in-memory ledger booked with checkout's claims (what escrow-ledger publishes as
   * payment.confirmed), in payment.confirmed's terms; empty with `claims: 'ledger'` (read the ledger instead).
   */
  ledgerPayments(): Array<Omit<EventData<'payment.confirmed'>, 'confirmedAt'>>;
}

/** A checkout service on real Postgres and NATS, a seller (both keys) and the seller's registry projections. */
export async function startHarness(
  label: string,
  extraEnv: Record<string, string> = {},
  /** claims: who answers `ledger.claim_transfer` (default `memory`: the contract's rule in this process). */
  options: { env?: TestEnvironment; claims?: 'memory' | 'ledger'; matching?: MatchingMode } = {},
): Promise<CheckoutHarness> {
  const sellerId = `sel_${randomBytes(4).toString('hex')}`;
  const publishableKey = `pk_test_${randomBytes(12).toString('hex')}`;
  const secretKey = `sk_test_${randomBytes(12).toString('hex')}`;
  let claims: Awaited<ReturnType<typeof serveTransferClaimsForTests>> | undefined;
  const harness = await startServiceHarness(
    label,
    async ({ env, clock, onStop }) => {
      const bus = await env.bus();
      if ((options.claims ?? 'memory') === 'memory') {
        const served = await serveTransferClaimsForTests(bus);
        claims = served;
        onStop(() => served.stop(), 'after');
      }
      const seller = { walletAddress: testWallets.seller.address, payoutAddress: testWallets.seller.address };
      const sellers = await serveSellersForTests(bus, {
        [secretKey]: { sellerId, ...seller, publishableKey, apiKeyVersion: 1 },
      });
      onStop(() => sellers.stop());
      const settings = { USDC_ADDRESS: USDC, ESCROW_ADDRESS: ESCROW, SWEEP_INTERVAL_MS: '100', ...extraEnv };
      return startCheckout(loadConfig(env.envFor('checkout', settings), clock.now));
    },
    { env: options.env },
  );
  const bus = await harness.env.bus();
  const publish = async <S extends Subject>(type: S, data: EventData<S>, producer?: ServiceName) => {
    const event = eventOf(type, data, { producer });
    await bus.js.publish(bus.subjectFor(type), encodeEnvelope(event), { msgID: event.id });
    return event.id;
  };
  await publish(
    'seller.updated',
    eventDataOf('seller.updated', {
      sellerId,
      walletAddress: testWallets.seller.address,
      payoutAddress: testWallets.seller.address,
      publishableKey,
      ...(options.matching ? { checkoutMatching: options.matching } : {}),
      updatedAt: new Date().toISOString(),
    }),
  );
  await waitFor(
    () =>
      harness.service.ctx.db
        .selectFrom('sellers')
        .select('seller_id')
        .where('seller_id', '=', sellerId)
        .executeTakeFirst(),
    { message: 'seller projection' },
  );
  return {
    ...harness,
    running: harness.service,
    bus,
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
  };
}

/** An active PROXY skill of the harness's seller with one endpoint per price (48 h hold). */
export function skillEvent(
  h: CheckoutHarness,
  overrides: Partial<EventData<'skill.updated'>> & { name: string },
  prices: string[] = ['5'],
): EventData<'skill.updated'> {
  return eventDataOf('skill.updated', {
    skillId: `sk_${overrides.name}`,
    sellerId: h.sellerId,
    displayName: `Skill ${overrides.name}`,
    status: 'ACTIVE',
    holdPeriodHours: 48,
    endpoints: prices.map((price, i) => ({
      endpointId: `ep_${overrides.name}_${i}`,
      path: `/item-${i}`,
      method: 'POST' as const,
      description: `item ${i}`,
      price,
      isHealthy: true,
      active: true,
    })),
    updatedAt: new Date().toISOString(),
    ...overrides,
  });
}

export async function publishSkill(h: CheckoutHarness, event: EventData<'skill.updated'>): Promise<void> {
  await h.publish('skill.updated', event);
  await waitFor(
    async () =>
      (
        await h.service.ctx.db
          .selectFrom('skills')
          .select('revision')
          .where('skill_id', '=', event.skillId)
          .executeTakeFirst()
      )?.revision === event.revision,
    { message: 'skill projection' },
  );
}

let txCounter = 0;
/** A confirmed transfer of `amount` from the buyer to the checkout wallet, on its own transaction and block. */
export function transferEvent(
  amount: string,
  overrides: Partial<EventData<'transfer.observed'>> = {},
): EventData<'transfer.observed'> {
  txCounter++;
  return eventDataOf('transfer.observed', {
    chainId: 31337,
    network: 'local',
    txHash: `0x${randomBytes(32).toString('hex')}`,
    blockNumber: 100 + txCounter,
    blockHash: `0x${randomBytes(32).toString('hex')}`,
    from: testWallets.buyer.address,
    to: CHECKOUT_WALLET,
    token: USDC,
    amount,
    observedAt: new Date().toISOString(),
    ...overrides,
  });
}
