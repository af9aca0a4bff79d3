import { type Bus, encodeEnvelope, type RpcServer, serveRpcs } from '@paygate/bus';
import { formatAddress, getTransferLogs, usdcAbi } from '@paygate/chain';
import {
  createEvent,
  type EventData,
  type EventEnvelope,
  type RpcReply,
  type RpcRequest,
} from '@paygate/contracts';
import { formatUsdc, parseUsdc } from '@paygate/money';
import {
  type AnvilInstance,
  deployTestUsdc,
  fundTestWallets,
  startAnvil,
  type TestEnvironment,
  testWallets,
} from '@paygate/testing';
import { Contract } from 'ethers';

type ReservePayoutRequest = RpcRequest<'ledger.reserve_payout'>;

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
    // The tests' ledger answers in the test's own process: on a loaded machine it has been slower than the 5 s
    // default, and a reservation not answered waits for the scheduler's next pass (an hour here).
    LEDGER_TIMEOUT_MS: '20000',
    ...extra,
  });
}

/** Publishes an event straight to JetStream, as its owner's outbox relay would. */
export async function publishEvent(bus: Bus, envelope: EventEnvelope): Promise<void> {
  await bus.js.publish(bus.subjectFor(envelope.type), encodeEnvelope(envelope), { msgID: envelope.id });
}

let revision = 0;
export function sellerUpdated(
  sellerId: string,
  settings: Partial<EventData<'seller.updated'>> = {},
): EventEnvelope<'seller.updated', EventData<'seller.updated'>> {
  revision += 1;
  return createEvent('seller.updated', 'registry', {
    sellerId,
    revision,
    walletAddress: testWallets.seller.address,
    payoutAddress: testWallets.seller.address,
    publishableKey: `pk_test_${sellerId.padEnd(16, 'x')}`,
    apiKeyVersion: 1,
    webhookUrl: null,
    webhookSecretVersion: 0,
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
  return createEvent('refund.initiated', 'escrow-ledger', {
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
 * Answers ledger.reserve_payout / ledger.cancel_payout / ledger.authorize_transfer from in-memory balances, with
 * the contract's semantics: idempotent per settlementId; reserves the whole available balance when it reaches the
 * minimum; refuses a reservation given back (`cancel`) as `reservation_cancelled`; keeps whether settlement said it
 * recorded a payout (`recorded`); authorises only its reservations and the refunds it `booked`.
 * Only for these tests until escrow-ledger's responder is on main.
 */
export class TestLedger {
  readonly available = new Map<string, bigint>();
  readonly reservations = new Map<
    string,
    { sellerId: string; amountMicro: bigint; cancelled: boolean; recorded: boolean; payoutAddress?: string }
  >();
  readonly requests: ReservePayoutRequest[] = [];
  /** Settlement ids whose reservation this ledger makes but whose answer is lost (the handler fails after it). */
  readonly answersLost = new Set<string>();
  /** Settlement ids whose `recorded` acknowledgement this ledger does not hear (the handler fails first). */
  readonly unheardAcknowledgements = new Set<string>();
  /** Settlement ids whose payout authorisation this ledger does not hear (the handler fails first). */
  readonly unheardAuthorizations = new Set<string>();
  /** Refunds "booked" by this ledger (see `booked`): the only ones it authorises. */
  readonly refunds = new Map<string, { to: string; amountMicro: bigint }>();
  readonly authorizations: Array<RpcRequest<'ledger.authorize_transfer'>> = [];
  private server: RpcServer | undefined;

  /** Starts answering (requests and replies validated against the contract like the real ledger's). */
  async serve(bus: Bus): Promise<this> {
    this.server = await serveRpcs(
      bus,
      'escrow-ledger',
      {
        'ledger.reserve_payout': async (request) => {
          this.requests.push(request);
          if (request.recorded && this.unheardAcknowledgements.has(request.settlementId)) {
            throw new Error('acknowledgement not heard');
          }
          const reply = this.reserve(request);
          if (this.answersLost.has(request.settlementId)) throw new Error('answer lost');
          return reply;
        },
        'ledger.authorize_transfer': async (request) => {
          this.authorizations.push(request);
          if (this.unheardAuthorizations.has(request.id)) throw new Error('authorisation not heard');
          return this.authorize(request);
        },
        'ledger.cancel_payout': async ({ settlementId }) =>
          this.cancel(settlementId)
            ? { ok: true, status: 'cancelled' }
            : { ok: false, reason: 'unknown_settlement' },
      },
      { warn: () => undefined, error: () => undefined },
    );
    return this;
  }

  /** Books the refund an event announces (as the real ledger does before publishing it); returns the event. */
  booked<E extends EventEnvelope<'refund.initiated', EventData<'refund.initiated'>>>(event: E): E {
    this.refunds.set(event.data.refundId, {
      to: event.data.payer.toLowerCase(),
      amountMicro: parseUsdc(event.data.amount),
    });
    return event;
  }

  private authorize(request: RpcRequest<'ledger.authorize_transfer'>): RpcReply<'ledger.authorize_transfer'> {
    const amountMicro = parseUsdc(request.amount);
    const to = request.to.toLowerCase();
    let booked: { to?: string; amountMicro: bigint } | undefined;
    if (request.kind === 'refund') booked = this.refunds.get(request.id);
    else if (request.kind === 'payout') {
      const reservation = this.reservations.get(request.id);
      if (reservation?.cancelled) return { ok: false, reason: 'not_pending', message: 'cancelled' };
      booked = reservation && {
        to: reservation.payoutAddress?.toLowerCase(),
        amountMicro: reservation.amountMicro,
      };
    }
    if (!booked)
      return { ok: false, reason: 'unknown_transfer', message: `no ${request.kind} ${request.id}` };
    if (booked.to !== undefined && booked.to !== to) {
      return { ok: false, reason: 'recipient_differs', message: `booked to ${booked.to}` };
    }
    if (booked.amountMicro !== amountMicro) {
      return { ok: false, reason: 'amount_differs', message: `booked ${formatUsdc(booked.amountMicro)}` };
    }
    return { ok: true };
  }

  /** Gives a reservation back (cancel_payout, or the real ledger's sweep); false when there is none. */
  cancel(settlementId: string): boolean {
    const reservation = this.reservations.get(settlementId);
    if (!reservation) return false;
    if (!reservation.cancelled) {
      reservation.cancelled = true;
      this.credit(reservation.sellerId, formatUsdc(reservation.amountMicro));
    }
    return true;
  }

  credit(sellerId: string, amount: string): void {
    this.available.set(sellerId, (this.available.get(sellerId) ?? 0n) + parseUsdc(amount));
  }

  private reserve(request: ReservePayoutRequest): RpcReply<'ledger.reserve_payout'> {
    const existing = this.reservations.get(request.settlementId);
    if (existing?.cancelled) return { ok: false, reason: 'reservation_cancelled', message: 'cancelled' };
    if (existing) {
      if (request.recorded) existing.recorded = true;
      return { ok: true, amount: formatUsdc(existing.amountMicro) };
    }
    const available = this.available.get(request.sellerId) ?? 0n;
    if (available === 0n) return { ok: false, reason: 'nothing_available', available: '0' };
    if (available < parseUsdc(request.minimumAmount)) {
      return { ok: false, reason: 'below_minimum', available: formatUsdc(available) };
    }
    this.available.set(request.sellerId, 0n);
    this.reservations.set(request.settlementId, {
      sellerId: request.sellerId,
      amountMicro: available,
      cancelled: false,
      recorded: false,
      payoutAddress: request.payoutAddress,
    });
    return { ok: true, amount: formatUsdc(available) };
  }

  async stop(): Promise<void> {
    await this.server?.stop();
  }
}
