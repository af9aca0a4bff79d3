import { Counter, Gauge, type ServiceContext } from '@paygate/runtime';
import { sql } from 'kysely';
import type { Clock } from './clock';
import type { SettlementConfig } from './config';
import { FREQUENCIES, type SettlementDB, TRANSFER_KINDS, type TransferKind } from './db';
import type { RelayerChain } from './relayer/chain';
import { periodAt } from './schedule/periods';
import { unscheduledIn } from './schedule/scheduler';
import type { EscrowChain } from './transfers/chain';

export type SettlementMetrics = ReturnType<typeof createSettlementMetrics>;

export function createSettlementMetrics(ctx: ServiceContext<SettlementDB>, txTimeoutMs: number) {
  const registers = [ctx.metrics.registry];
  // Each metric spelled as `new Counter({ name: … })`: the alert and dashboard tests find what is exported that way.
  const transfersSent = new Counter({
    name: 'settlement_transfers_sent_total',
    help: 'Outgoing USDC transfers confirmed on chain, by kind',
    labelNames: ['kind'],
    registers,
  });
  const payoutsSent = new Counter({
    name: 'settlement_payouts_sent_total',
    help: 'Seller payouts confirmed on chain',
    registers,
  });
  const refundsSent = new Counter({
    name: 'settlement_refunds_sent_total',
    help: 'Refund transfers confirmed on chain',
    registers,
  });
  return {
    /** Counts a transfer confirmed on chain (money that actually left escrow). */
    transferSent(kind: TransferKind) {
      transfersSent.inc({ kind });
      if (kind === 'payout') payoutsSent.inc();
      else if (kind === 'refund') refundsSent.inc();
    },
    transfersRefused: new Counter({
      name: 'settlement_transfers_refused_total',
      help: 'Transfers out of escrow refused before signing (not authorised by the ledger, or above MAX_TRANSFER_USDC), by kind and reason',
      labelNames: ['kind', 'reason'],
      registers,
    }),
    transfersFailed: new Counter({
      name: 'settlement_transfers_failed_total',
      help: 'Outgoing transfers that reverted or could not be sent, by kind',
      labelNames: ['kind'],
      registers,
    }),
    transfersRevertedAfterConfirmation: new Counter({
      name: 'settlement_transfers_reverted_after_confirmation_total',
      help: 'Transfers reported confirmed, dropped by a reorg and then mined reverted (no money left escrow), by kind',
      labelNames: ['kind'],
      registers,
    }),
    transfersDroppedAfterFinal: new Counter({
      name: 'settlement_transfers_dropped_after_final_total',
      help: 'Transfers final (2 x CONFIRMATIONS deep) that a deeper reorg dropped and the same signed bytes were watched and sent again, by kind',
      labelNames: ['kind'],
      registers,
    }),
    settlementsSkipped: new Counter({
      name: 'settlement_settlements_skipped_total',
      help: 'Settlement periods skipped because the available balance was below the minimum',
      labelNames: ['reason'],
      registers,
    }),
    stuckTransfers: new Gauge({
      name: 'settlement_stuck_transfers',
      help: 'Outgoing transfers not confirmed within TX_TIMEOUT_MS of being signed (or recorded, if unsigned)',
      registers,
      async collect() {
        this.set(await countStuckTransfers(ctx, txTimeoutMs).catch(() => -1));
      },
    }),
  };
}

/** Transfers recorded (unsigned) or signed longer than `olderThanMs` ago and not yet confirmed. */
async function countStuckTransfers(ctx: ServiceContext<SettlementDB>, olderThanMs: number): Promise<number> {
  const result = await sql<{ count: string }>`
    select count(*)::text as count from outgoing_transfers
    where (status = 'created' and created_at < now() - make_interval(secs => ${olderThanMs / 1000}))
       or (status in ('signed', 'broadcast')
           and signed_at < now() - make_interval(secs => ${olderThanMs / 1000}))`.execute(ctx.db);
  return Number(result.rows[0]?.count ?? 0);
}

/** A settlement period is missed once this many scheduler passes went by since it opened without a payout asked. */
export const PERIOD_OVERDUE_AFTER_PASSES = 10;

type WatchConfig = Pick<
  SettlementConfig,
  'schedulerIntervalMs' | 'settlementPeriodSeconds' | 'relayer' | 'checkoutSweep'
>;

/** Gauges read at each scrape (-1 when a read failed): the money that waits. */
export function registerWaitingMoneyGauges(
  ctx: ServiceContext<SettlementDB>,
  config: WatchConfig,
  clock: Clock,
) {
  const registers = [ctx.metrics.registry];
  new Gauge({
    name: 'settlement_transfers_pending',
    help: 'Outgoing transfers recorded and not yet confirmed or failed (created, signed, broadcast), by kind',
    labelNames: ['kind'],
    registers,
    async collect() {
      const rows = await sql<{ kind: TransferKind; count: string }>`
        select kind, count(*)::text as count from outgoing_transfers
        where status in ('created', 'signed', 'broadcast') group by kind`
        .execute(ctx.db)
        .then((result) => result.rows)
        .catch(() => undefined);
      for (const kind of TRANSFER_KINDS) {
        this.set({ kind }, rows ? Number(rows.find((row) => row.kind === kind)?.count ?? 0) : -1);
      }
    },
  });
  new Gauge({
    name: 'settlement_periods_overdue',
    help: `Settlement periods open for ${PERIOD_OVERDUE_AFTER_PASSES} scheduler passes without their payout asked of the ledger: stage unscheduled (no settlement created) or unreserved (the ledger did not answer)`,
    labelNames: ['stage'],
    registers,
    async collect() {
      const now = clock();
      const cutoff = new Date(now.getTime() - PERIOD_OVERDUE_AFTER_PASSES * config.schedulerIntervalMs);
      const due = FREQUENCIES.map((frequency) =>
        periodAt(frequency, now, config.settlementPeriodSeconds),
      ).filter((period) => period.start < cutoff);
      const unscheduled =
        due.length === 0
          ? Promise.resolve(0)
          : ctx.db
              .selectFrom('sellers')
              .select((eb) => eb.fn.countAll<string>().as('count'))
              .where(unscheduledIn(due))
              .executeTakeFirst()
              .then((row) => Number(row?.count ?? 0));
      const unreserved = ctx.db
        .selectFrom('settlements')
        .select((eb) => eb.fn.countAll<string>().as('count'))
        .where('status', '=', 'pending')
        .where('created_at', '<', cutoff)
        .executeTakeFirst()
        .then((row) => Number(row?.count ?? 0));
      this.set({ stage: 'unscheduled' }, await unscheduled.catch(() => -1));
      this.set({ stage: 'unreserved' }, await unreserved.catch(() => -1));
    },
  });
}

/** The gas of the wallets settlement pays it from (escrow, the relayer's keys, the checkout wallet), and its floor. */
export function registerGasGauges(
  ctx: ServiceContext<SettlementDB>,
  config: WatchConfig,
  escrow: EscrowChain,
  relayerKeys: readonly RelayerChain[],
) {
  const registers = [ctx.metrics.registry];
  const wallets = [
    { wallet: 'escrow', address: escrow.address },
    ...relayerKeys.map((key) => ({ wallet: 'relayer', address: key.address })),
    ...(config.checkoutSweep ? [{ wallet: 'checkout', address: config.checkoutSweep.address }] : []),
  ];
  new Gauge({
    name: 'settlement_gas_balance_wei',
    help: 'ETH balance of each wallet settlement pays gas from (escrow, relayer, checkout); -1: the chain did not answer',
    labelNames: ['wallet', 'address'],
    registers,
    async collect() {
      await Promise.all(
        wallets.map(async ({ wallet, address }) => {
          const wei = await escrow.provider.getBalance(address).catch(() => undefined);
          // A float: exact to the wei below 2^53 (0.009 ETH), close enough above for an alert.
          this.set({ wallet, address }, wei === undefined ? -1 : Number(wei));
        }),
      );
    },
  });
  const floor = new Gauge({
    name: 'settlement_gas_min_balance_wei',
    help: 'RELAYER_MIN_BALANCE_WEI, per wallet: below it the relayer refuses new work (the alerts warn at twice it)',
    labelNames: ['wallet', 'address'],
    registers,
  });
  const minBalanceWei = config.relayer?.minBalanceWei ?? 500_000_000_000_000n;
  for (const { wallet, address } of wallets) floor.set({ wallet, address }, Number(minBalanceWei));
}
