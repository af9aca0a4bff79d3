import { parseUsdc } from '@paygate/money';
import { useMemo } from 'preact/hooks';
import type { ApiClient, Query } from './api';
import { PaymentsChart } from './chart';
import { useDashboard } from './context';
import { dateTime, usd } from './format';
import { CHART_DAYS, dayLabel, nextPayoutAt, totals } from './overview';
import type { Account, Balances, Page, Skill, Transaction } from './types';
import { Address, Empty, Figure, Link, type Loaded, LoadState, useGet, useLoad } from './ui';

/** Pages of 200 fetched at most for the chart, the figures and a CSV export (2,000 transactions). */
const MAX_PAGES = 10;

export async function fetchAll(api: ApiClient, query: Query): Promise<Transaction[]> {
  const all: Transaction[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const result = await api.request<Page<Transaction>>('GET', '/api/v1/transactions', {
      query: { ...query, limit: 200, cursor },
    });
    all.push(...result.data);
    cursor = result.nextCursor ?? undefined;
    if (!cursor) break;
  }
  return all;
}

/** The last CHART_DAYS UTC days of payments (the chart and the figures read the same rows). */
export function useRecentPayments() {
  const { api } = useDashboard();
  return useLoad(
    () => {
      const from = new Date(Date.now() - (CHART_DAYS - 1) * 86_400_000).toISOString().slice(0, 10);
      return fetchAll(api, { confirmedFrom: from });
    },
    [],
    { live: true },
  );
}

/** The home page: what came in, what went out, what is paid next and when. */
export function OverviewPage() {
  const recent = useRecentPayments();
  const balances = useGet<Balances>('/api/v1/balances', { live: true });
  const account = useGet<Account>('/api/v1/account', { live: true });
  const skills = useGet<Page<Skill>>('/api/v1/manage/skills', { query: { limit: 50 }, live: true });
  return (
    <>
      <h1>Overview</h1>
      {account.data && skills.data && recent.data && (
        <Checklist account={account.data} skills={skills.data.data} payments={recent.data} />
      )}
      <RecentFigures recent={recent} />
      <section aria-labelledby="payout-next-title">
        <h2 id="payout-next-title">Next payout</h2>
        <LoadState load={balances} what="balances">
          {(b) => (
            <LoadState load={account} what="your settlement settings">
              {(a) => <NextPayout balances={b} account={a} />}
            </LoadState>
          )}
        </LoadState>
        <p>
          <Link to="/money">All payments, refunds and settlements →</Link>
        </p>
      </section>
    </>
  );
}

/** The last CHART_DAYS days in figures (gross, refunds, fees, net) and as a chart. */
function RecentFigures(props: { recent: Loaded<Transaction[]> }) {
  const { recent } = props;
  const figures = useMemo((): Array<[string, string, string]> | undefined => {
    if (!recent.data) return undefined;
    const { gross, refunds, fees, net, count } = totals(recent.data);
    return [
      ['Gross', gross, `${count} payment${count === 1 ? '' : 's'}`],
      ['Refunds', refunds, 'sent back to buyers'],
      ['Fees', fees, "Paygate's 5%, less fees returned"],
      ['Net', net, 'what you get'],
    ];
  }, [recent.data]);
  return (
    <section aria-labelledby="figures-title">
      <h2 id="figures-title">Last {CHART_DAYS} days</h2>
      <LoadState load={recent} what="payments">
        {(rows) => (
          <>
            <div class="figures">
              {figures!.map(([label, value, hint]) => (
                <Figure
                  key={label}
                  label={label}
                  value={usd(value)}
                  hint={hint}
                  testId={`figure-${label.toLowerCase()}`}
                />
              ))}
            </div>
            {rows.length === 0 ? (
              <Empty>
                No payments in the last {CHART_DAYS} days. When a buyer pays one of your skills, it appears
                here within seconds.
              </Empty>
            ) : (
              <PaymentsChart payments={rows} />
            )}
          </>
        )}
      </LoadState>
    </section>
  );
}

function NextPayout(props: { balances: Balances; account: Account }) {
  const { balances, account } = props;
  const available = parseUsdc(balances.available);
  const minimum = parseUsdc(account.minimumSettlement);
  const next = nextPayoutAt(account.settlementFrequency, new Date());
  const reached = available >= minimum && available > 0n;
  // <progress> takes numbers: micro-USDC stays exact well below 2^53 for any balance this shows.
  const percent = minimum > 0n ? Number((available * 100n) / minimum) : available > 0n ? 100 : 0;
  return (
    <div class="figures">
      <Figure
        label="Available"
        value={usd(balances.available)}
        testId="overview-available"
        hintTestId="overview-minimum"
        hint={
          reached
            ? `at or above your ${usd(account.minimumSettlement)} minimum`
            : `${usd(account.minimumSettlement)} minimum: smaller balances wait for a later period`
        }
      >
        <progress
          class="minimum"
          value={Math.min(100, percent)}
          max={100}
          aria-label="Available against the minimum"
        />
      </Figure>
      <Figure
        label="Next payout run"
        value={dayLabel(next)}
        testId="overview-next-payout"
        hint={`${account.settlementFrequency.toLowerCase()}, after ${dateTime(next.toISOString())}${reached ? '' : '; only if the minimum is reached by then'}`}
      />
      <Figure
        label="Held"
        value={usd(balances.held)}
        hint="in escrow, released after each skill's hold period"
      />
    </div>
  );
}

/** The first steps of a new seller, until each is done (then the list goes away). */
function Checklist(props: { account: Account; skills: Skill[]; payments: Transaction[] }) {
  const { account, skills, payments } = props;
  const steps: Array<{ key: string; done: boolean; text: preact.ComponentChildren }> = [
    {
      key: 'payout',
      done:
        account.payoutAddress.toLowerCase() !== account.walletAddress.toLowerCase() ||
        account.pendingPayoutAddress !== null,
      text: (
        <>
          Check where payouts go: now <Address value={account.payoutAddress} label="payout address" /> (
          <Link to="/settings">change it in Settings</Link>)
        </>
      ),
    },
    {
      key: 'webhook',
      done: account.webhookUrl !== null,
      text: (
        <>
          <Link to="/settings">Set a webhook URL</Link> to hear of payments and refunds
        </>
      ),
    },
    {
      key: 'skill',
      done: skills.some((s) => s.status === 'ACTIVE'),
      text: (
        <>
          <Link to="/skills/new">Create your first skill</Link> and see it go active
        </>
      ),
    },
    {
      key: 'payment',
      done: payments.length > 0,
      text: 'Receive a test payment (pay your skill with the agent client on the test network)',
    },
  ];
  if (steps.every((step) => step.done)) return null;
  return (
    <section aria-labelledby="checklist-title" class="checklist">
      <h2 id="checklist-title">
        Getting started: {steps.filter((s) => s.done).length} of {steps.length} done
      </h2>
      <ul>
        {steps.map((step) => (
          <li key={step.key} data-testid={`step-${step.key}`} data-done={step.done}>
            <span aria-hidden="true">{step.done ? '✓ ' : '○ '}</span>
            <span class="visually-hidden">{step.done ? 'Done: ' : 'To do: '}</span>
            {step.text}
          </li>
        ))}
      </ul>
    </section>
  );
}
