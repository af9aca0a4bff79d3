import { type Bus, encodeEnvelope, requestRpc } from '@paygate/bus';
import { formatAddress, getTransferLogs, usdcAbi } from '@paygate/chain';
import type { EventData, EventEnvelope, Subject } from '@paygate/contracts';
import { formatUsdc, parseUsdc } from '@paygate/money';
import {
  type AnvilInstance,
  deployTestUsdc,
  eventOf,
  fundTestWallets,
  startAnvil,
  type TestEnvironment,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract } from 'ethers';
import type { Subscription } from 'nats';

export interface TestChain {
  anvil: AnvilInstance;
  usdcAddress: string;
  balanceOf(address: string): Promise<bigint>;
  /** Every USDC Transfer log out of the escrow wallet so far: the ground truth for exactly-once. */
  transfersFromEscrow(): Promise<Array<{ to: string; amountMicro: bigint; txHash: string }>>;
}

/** anvil + TestUSDC, with `escrowFunds` USDC minted to the escrow wallet (none when null). */
export async function startTestChain(escrowFunds: string | null = '1000'): Promise<TestChain> {
  const anvil = await startAnvil();
  const { address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl);
  if (escrowFunds !== null) {
    await fundTestWallets({
      rpcUrl: anvil.rpcUrl,
      usdcAddress,
      amountMicro: parseUsdc(escrowFunds),
      roles: ['escrow'],
    });
  }
  const usdc = new Contract(usdcAddress, usdcAbi, anvil.provider);
  return {
    anvil,
    usdcAddress,
    balanceOf: async (address) => BigInt(await usdc.getFunction('balanceOf')(address)),
    async transfersFromEscrow() {
      const head = await anvil.provider.getBlockNumber();
      const logs = await getTransferLogs(anvil.provider, {
        token: usdcAddress,
        fromBlock: 0,
        toBlock: head,
        maxRangeBlocks: 10_000,
      });
      return logs
        .filter((log) => log.from === formatAddress(testWallets.escrow.address))
        .map((log) => ({ to: log.to, amountMicro: log.amountMicro, txHash: log.txHash }));
    },
  };
}

export function settlementEnv(
  env: TestEnvironment,
  chain: TestChain,
  extra: Record<string, string> = {},
): NodeJS.ProcessEnv {
  return env.envFor('settlement', {
    CHAIN_RPC_URL: chain.anvil.rpcUrl,
    CHAIN_NETWORK: 'local',
    USDC_ADDRESS: chain.usdcAddress,
    ESCROW_PRIVATE_KEY: testWallets.escrow.privateKey,
    CONFIRMATIONS: '1',
    SCHEDULER_INTERVAL_MS: '3600000',
    TRANSFER_POLL_INTERVAL_MS: '200',
    TX_TIMEOUT_MS: '5000',
    RPC_TIMEOUT_MS: '3000',
    // How long settle-now and a platform payout wait for the ledger's decision (the tests' ledger decides in the
    // test's own process, slower than the 5 s default on a loaded machine).
    LEDGER_TIMEOUT_MS: '20000',
    ...extra,
  });
}

/**
 * An x402 payment booked by the ledger, as the gateway asks it: `ledger.claim_transfer` with the payment to book,
 * one command (the claim, the 95/5 booking into the hold, `payment.confirmed` in the ledger's outbox).
 */
export async function bookPayment(
  bus: Bus,
  payment: {
    chainId: number;
    txHash: string;
    logIndex: number;
    token: string;
    amount: string;
    payer: string;
    sellerId: string;
    holdPeriodHours: number;
  },
): Promise<void> {
  const reply = await requestRpc(
    bus,
    'ledger.claim_transfer',
    {
      chainId: payment.chainId,
      txHash: payment.txHash,
      logIndex: payment.logIndex,
      claimedVia: 'x402',
      reference: `local:${payment.txHash.toLowerCase()}`,
      payer: payment.payer,
      amount: payment.amount,
      payment: {
        paymentId: `pay_${payment.txHash.slice(2, 14)}`,
        source: 'x402',
        sellerId: payment.sellerId,
        skillId: null,
        skillName: null,
        endpointId: null,
        sessionId: null,
        network: 'local',
        token: payment.token,
        holdPeriodHours: payment.holdPeriodHours,
      },
    },
    { timeoutMs: 20_000 },
  );
  if (!reply.ok) throw new Error(`the ledger did not book the payment: ${JSON.stringify(reply)}`);
}

/** Publishes an event straight to JetStream, as its owner's outbox relay would. */
export async function publishEvent(bus: Bus, envelope: EventEnvelope): Promise<void> {
  await bus.js.publish(bus.subjectFor(envelope.type), encodeEnvelope(envelope), { msgID: envelope.id });
}

let revision = 0;
/** The seller's projection as registry publishes it, each call a newer revision (payout to the seller wallet). */
export function sellerUpdated(sellerId: string, settings: Partial<EventData<'seller.updated'>> = {}) {
  revision += 1;
  return eventOf('seller.updated', {
    sellerId,
    revision,
    walletAddress: testWallets.seller.address,
    payoutAddress: testWallets.seller.address,
    webhookUrl: null,
    settlementFrequency: 'DAILY',
    minimumSettlement: '10',
    updatedAt: new Date().toISOString(),
    ...settings,
  });
}

export function refundInitiated(
  refundId: string,
  amount: string,
  chainId: number,
  payer = testWallets.buyer.address,
) {
  return eventOf('refund.initiated', {
    refundId,
    transactionId: `txn_${refundId}`,
    sellerId: 'sel_refunds',
    payer,
    amount,
    chainId,
    initiatedAt: new Date().toISOString(),
  });
}

/**
 * Decides payouts as the ledger does, from in-memory balances, over the bus: hears `settlement.due` and
 * `revenue.payout_requested` (core subscriptions to what settlement's outbox publishes) and answers
 * `payout.reserved` / `payout.refused` as the ledger's outbox would (the whole available balance when it reaches
 * the minimum; a reservation stands per settlementId, a refusal is decided again), to the payout address of its own
 * view (`seller.updated`). `payout.failed` gives a reservation back once; `settlement.completed` books it sent.
 */
export class TestLedger {
  readonly available = new Map<string, bigint>();
  /** The ledger's view of each seller's payout address (from seller.updated, newer revisions only). */
  readonly payoutAddresses = new Map<string, { revision: number; address: string }>();
  readonly reservations = new Map<
    string,
    {
      sellerId: string | null;
      amountMicro: bigint;
      payoutAddress: string;
      status: 'reserved' | 'completed' | 'given_back';
    }
  >();
  readonly dues: Array<EventData<'settlement.due'>> = [];
  readonly failures: Array<EventData<'payout.failed'>> = [];
  /** Platform revenue a platform payout reserves. */
  platformRevenueMicro = 0n;
  /** Settlement ids whose decision is held back (a slow ledger) until `release`d. */
  readonly withheld = new Set<string>();
  /** Decides nothing at all (a ledger that is away). */
  withholdAll = false;
  private readonly held: Array<EventData<'settlement.due'>> = [];
  private readonly subscriptions: Subscription[] = [];
  private bus: Bus | undefined;

  async serve(bus: Bus): Promise<this> {
    this.bus = bus;
    const decoder = new TextDecoder();
    const seen = new Set<string>();
    const on = <S extends Subject>(type: S, handle: (data: EventData<S>) => Promise<void>) => {
      this.subscriptions.push(
        bus.nc.subscribe(bus.subjectFor(type), {
          callback: (_err, message) => {
            const event = JSON.parse(decoder.decode(message.data)) as EventEnvelope<S, EventData<S>>;
            // The outbox relay may publish an event again (an ack came late): one decision per event, like an inbox.
            if (seen.has(event.id)) return;
            seen.add(event.id);
            void handle(event.data).catch(() => undefined);
          },
        }),
      );
    };
    on('seller.updated', async (seller) => {
      const known = this.payoutAddresses.get(seller.sellerId);
      if (!known || known.revision < seller.revision) {
        this.payoutAddresses.set(seller.sellerId, {
          revision: seller.revision,
          address: seller.payoutAddress,
        });
      }
    });
    on('settlement.due', async (due) => {
      this.dues.push(due);
      if (this.withholdAll || this.withheld.has(due.settlementId)) this.held.push(due);
      else await this.decide(due);
    });
    on('revenue.payout_requested', async (request) => this.decidePlatform(request));
    on('payout.failed', async (failed) => {
      this.failures.push(failed);
      const reservation = this.reservations.get(failed.payoutId);
      if (reservation?.status !== 'reserved') return;
      reservation.status = 'given_back';
      if (reservation.sellerId) this.credit(reservation.sellerId, formatUsdc(reservation.amountMicro));
      else this.platformRevenueMicro += reservation.amountMicro;
    });
    on('settlement.completed', async (completed) => {
      const reservation = this.reservations.get(completed.settlementId);
      if (reservation?.status === 'reserved') reservation.status = 'completed';
    });
    on('revenue.paid_out', async (paid) => {
      const reservation = this.reservations.get(paid.payoutId);
      if (reservation?.status === 'reserved') reservation.status = 'completed';
    });
    await bus.nc.flush();
    return this;
  }

  /** Decides the held-back dues of `settlementId` now. */
  async release(settlementId: string): Promise<void> {
    this.withheld.delete(settlementId);
    for (const due of this.held.splice(0).filter((d) => d.settlementId === settlementId))
      await this.decide(due);
  }

  credit(sellerId: string, amount: string): void {
    this.available.set(sellerId, (this.available.get(sellerId) ?? 0n) + parseUsdc(amount));
  }

  private async decide(due: EventData<'settlement.due'>): Promise<void> {
    // Like the ledger, which has a due redelivered until its own view heard the seller's seller.updated.
    await waitFor(() => this.payoutAddresses.has(due.sellerId), { timeoutMs: 10_000 }).catch(() => undefined);
    if (this.reservations.has(due.settlementId)) return;
    const available = this.available.get(due.sellerId) ?? 0n;
    const at = new Date().toISOString();
    if (available <= 0n || available < parseUsdc(due.minimumAmount)) {
      await this.answer(
        eventOf('payout.refused', {
          payoutId: due.settlementId,
          kind: 'seller',
          sellerId: due.sellerId,
          reason: available <= 0n ? 'nothing_available' : 'below_minimum',
          available: formatUsdc(available < 0n ? 0n : available),
          refusedAt: at,
        }),
      );
      return;
    }
    const payoutAddress = this.payoutAddresses.get(due.sellerId)?.address;
    if (!payoutAddress) throw new Error(`TestLedger: no payout address for ${due.sellerId}`);
    this.available.set(due.sellerId, 0n);
    this.reservations.set(due.settlementId, {
      sellerId: due.sellerId,
      amountMicro: available,
      payoutAddress,
      status: 'reserved',
    });
    await this.answer(
      eventOf('payout.reserved', {
        payoutId: due.settlementId,
        kind: 'seller',
        sellerId: due.sellerId,
        amount: formatUsdc(available),
        payoutAddress,
        reservedAt: at,
      }),
    );
  }

  private async decidePlatform(request: EventData<'revenue.payout_requested'>): Promise<void> {
    if (this.reservations.has(request.payoutId)) return;
    const revenue = this.platformRevenueMicro;
    const at = new Date().toISOString();
    if (revenue <= 0n) {
      await this.answer(
        eventOf('payout.refused', {
          payoutId: request.payoutId,
          kind: 'platform',
          sellerId: null,
          reason: 'nothing_available',
          available: '0',
          refusedAt: at,
        }),
      );
      return;
    }
    this.platformRevenueMicro = 0n;
    this.reservations.set(request.payoutId, {
      sellerId: null,
      amountMicro: revenue,
      payoutAddress: request.treasuryAddress,
      status: 'reserved',
    });
    await this.answer(
      eventOf('payout.reserved', {
        payoutId: request.payoutId,
        kind: 'platform',
        sellerId: null,
        amount: formatUsdc(revenue),
        payoutAddress: request.treasuryAddress,
        reservedAt: at,
      }),
    );
  }

  /** Publishes a decision as the ledger's outbox relay would. */
  async answer(envelope: EventEnvelope): Promise<void> {
    await publishEvent(this.bus!, envelope);
  }

  async stop(): Promise<void> {
    for (const subscription of this.subscriptions) subscription.unsubscribe();
  }
}
