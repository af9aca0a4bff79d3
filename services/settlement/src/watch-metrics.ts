import { Gauge, type ServiceContext } from '@paygate/runtime';
import { sql } from 'kysely';
import type { Clock } from './clock';
import type { SettlementConfig } from './config';
import type { Frequency, SettlementDB, TransferKind } from './db';
import type { RelayerChain } from './relayer/chain';
import { periodAt } from './schedule/periods';
import { unscheduledIn } from './schedule/scheduler';
import type { EscrowChain } from './transfers/chain';

/** A settlement period is missed once this many scheduler passes went by since it opened without a payout asked. */
export const PERIOD_OVERDUE_AFTER_PASSES = 10;

const FREQUENCIES: Frequency[] = ['DAILY', 'WEEKLY', 'MONTHLY'];
const KINDS: TransferKind[] = ['payout', 'refund', 'platform_payout'];

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
      for (const kind of KINDS) {
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
