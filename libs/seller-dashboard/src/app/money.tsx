import { usd } from './format';
import { RefundRequestsSection } from './refunds';
import { SettlementsSection } from './settlements';
import { TransactionsSection } from './transaction-list';
import type { Balances } from './types';
import { Figure, LoadState, useGet } from './ui';

export function MoneyPage() {
  return (
    <>
      <h1>Money</h1>
      <BalancesCard />
      <TransactionsSection />
      <RefundRequestsSection />
      <SettlementsSection />
    </>
  );
}

function BalancesCard() {
  const balances = useGet<Balances>('/api/v1/balances', { live: true });
  const items: Array<[keyof Balances, string, string]> = [
    ['held', 'Held', 'in escrow, in their hold period'],
    ['available', 'Available', 'released, paid out at the next settlement'],
    ['settling', 'Settling', 'in a payout being sent'],
    ['settled', 'Settled', 'paid out to your address'],
    ['owed', 'Owed', 'refunds after settlement, taken from the next payouts'],
  ];
  return (
    <section aria-labelledby="balances-title">
      <h2 id="balances-title">Balances</h2>
      <LoadState load={balances} what="balances">
        {(data) => (
          <div class="balances">
            {items.map(([key, label, hint]) => (
              <Figure
                key={key}
                class="balance"
                label={label}
                value={usd(data[key])}
                hint={hint}
                testId={`balance-${key}`}
              />
            ))}
          </div>
        )}
      </LoadState>
    </section>
  );
}
