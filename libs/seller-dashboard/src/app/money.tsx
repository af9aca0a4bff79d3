import { parseUsdc } from '@paygate/money';
import { useMemo, useState } from 'preact/hooks';
import { plainMessage } from './api';
import { PaymentsChart } from './chart';
import { useDashboard } from './context';
import { transactionsCsv } from './csv';
import { dateTime, explorerTxUrl, shortHash, statusWords, usd } from './format';
import { dailyBySkill, periodLabel } from './overview';
import { CHART_DAYS, fetchAll, useRecentPayments } from './overview-page';
import { sellerNet } from './refund-effect';
import { RefundForm, RefundRequestsSection } from './refunds';
import { filterTransactions, partialHash, type TransactionFilters, transactionQuery } from './transactions';
import type { Balances, Page, Settlement, Skill, Transaction, TransactionDetail } from './types';
import {
  Address,
  CopyButton,
  Empty,
  ErrorNote,
  Field,
  Link,
  Loading,
  LoadState,
  StatusBadge,
  useLoad,
} from './ui';

const TRANSACTION_STATUSES = [
  'held',
  'available',
  'settling',
  'settled',
  'partially_refunded',
  'refunded',
  'reversed',
];
const PAGE_SIZE = 50;
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
  const { api } = useDashboard();
  const balances = useLoad(() => api.request<Balances>('GET', '/api/v1/balances'), [], { live: true });
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
              <article key={key} class="balance">
                <h3>{label}</h3>
                <p class="amount" data-testid={`balance-${key}`}>
                  {usd(data[key])}
                </p>
                <small>{hint}</small>
              </article>
            ))}
          </div>
        )}
      </LoadState>
    </section>
  );
}

function TransactionsSection() {
  const { api } = useDashboard();
  const [filters, setFilters] = useState<TransactionFilters>({});
  const [cursor, setCursor] = useState<string | undefined>();
  const [rows, setRows] = useState<Transaction[]>([]);
  const [exporting, setExporting] = useState(false);
  const [exportError, setExportError] = useState<unknown>();
  // Dates, skill, status and a whole tx hash are filtered by the API; a partial hash over the rows loaded.
  const query = transactionQuery(filters);
  const queryKey = JSON.stringify(query);
  const loaded = useLoad(
    async () => {
      const page = await api.request<Page<Transaction>>('GET', '/api/v1/transactions', {
        query: { ...query, limit: PAGE_SIZE, cursor },
      });
      setRows((earlier) => (cursor ? [...earlier, ...page.data] : page.data));
      return page;
      // Live while only the first page is shown (a refresh would drop the pages loaded after it).
    },
    [queryKey, cursor],
    { live: !cursor },
  );
  const recent = useRecentPayments();
  const skills = useLoad(
    () =>
      api
        .request<Page<Skill>>('GET', '/api/v1/manage/skills', { query: { limit: 100 } })
        .then((page) => page.data.map((skill) => skill.name).sort()),
    [],
  );
  const filtered = useMemo(
    () => filterTransactions(rows, { txHash: partialHash(filters.txHash) }),
    [rows, filters],
  );
  const series = useMemo(() => dailyBySkill(recent.data ?? [], new Date(), CHART_DAYS), [recent.data]);
  const set = (patch: Partial<TransactionFilters>) => {
    setFilters({ ...filters, ...patch });
    setCursor(undefined);
  };
  const exportCsv = async () => {
    setExporting(true);
    setExportError(undefined);
    try {
      const all = filterTransactions(await fetchAll(api, query), { txHash: partialHash(filters.txHash) });
      const blob = new Blob([transactionsCsv(all)], { type: 'text/csv;charset=utf-8' });
      const url = URL.createObjectURL(blob);
      const link = document.createElement('a');
      link.href = url;
      link.download = `paygate-transactions-${new Date().toISOString().slice(0, 10)}.csv`;
      link.click();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    } catch (error) {
      setExportError(error);
    } finally {
      setExporting(false);
    }
  };
  return (
    <section aria-labelledby="transactions-title">
      <h2 id="transactions-title">Payments</h2>
      {recent.data && <PaymentsChart series={series} />}
      <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Filter transactions">
        <div class="grid">
          <Field id="f-from" label="From">
            {(aria) => (
              <input
                {...aria}
                type="date"
                value={filters.from ?? ''}
                onInput={(e) => set({ from: (e.target as HTMLInputElement).value || undefined })}
              />
            )}
          </Field>
          <Field id="f-to" label="To">
            {(aria) => (
              <input
                {...aria}
                type="date"
                value={filters.to ?? ''}
                onInput={(e) => set({ to: (e.target as HTMLInputElement).value || undefined })}
              />
            )}
          </Field>
          <Field id="f-skill" label="Skill">
            {(aria) => (
              <select
                {...(aria as object)}
                value={filters.skill ?? ''}
                onChange={(e) => set({ skill: (e.target as HTMLSelectElement).value || undefined })}
              >
                <option value="">All skills</option>
                {(skills.data ?? []).map((s) => (
                  <option key={s}>{s}</option>
                ))}
              </select>
            )}
          </Field>
          <Field id="f-status" label="Status">
            {(aria) => (
              <select
                {...(aria as object)}
                value={filters.status ?? ''}
                onChange={(e) => set({ status: (e.target as HTMLSelectElement).value || undefined })}
              >
                <option value="">Any status</option>
                {TRANSACTION_STATUSES.map((s) => (
                  <option key={s} value={s}>
                    {statusWords(s)}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field id="f-hash" label="Transaction hash">
            {(aria) => (
              <input
                {...aria}
                placeholder="0x…"
                value={filters.txHash ?? ''}
                onInput={(e) => set({ txHash: (e.target as HTMLInputElement).value || undefined })}
              />
            )}
          </Field>
        </div>
      </form>
      {loaded.data === undefined ? (
        <LoadState load={loaded} what="payments">
          {() => null}
        </LoadState>
      ) : filtered.length === 0 ? (
        <Empty>
          {Object.values(filters).every((v) => !v)
            ? 'No payments yet. When a buyer pays one of your skills, it appears here within seconds.'
            : 'No transaction matches these filters.'}
        </Empty>
      ) : (
        <>
          <p role="status">
            {filtered.length} transaction{filtered.length === 1 ? '' : 's'}
            {loaded.data?.nextCursor ? ' shown, more below' : ''}.{' '}
            <button
              type="button"
              class="outline small"
              onClick={exportCsv}
              aria-busy={exporting}
              disabled={exporting}
            >
              Export CSV
            </button>
          </p>
          {exportError !== undefined && (
            <p class="error-note" role="alert">
              The CSV export failed, nothing was downloaded: {plainMessage(exportError)}
            </p>
          )}
          <section class="table-wrap" aria-label="Transactions (scrolls sideways)">
            <table class="striped">
              <caption class="visually-hidden">Transactions</caption>
              <thead>
                <tr>
                  <th scope="col">Date</th>
                  <th scope="col">Skill</th>
                  <th scope="col">Amount</th>
                  <th scope="col">You get</th>
                  <th scope="col">Status</th>
                  <th scope="col">Tx</th>
                </tr>
              </thead>
              <tbody>
                {filtered.map((t) => (
                  <tr key={t.transactionId}>
                    <td>
                      <Link to={`/money/transactions/${t.transactionId}`}>{dateTime(t.confirmedAt)}</Link>
                    </td>
                    <td>{t.skillName ?? '—'}</td>
                    <td>{usd(t.amount)}</td>
                    <td>
                      {usd(sellerNet(t))}
                      {parseUsdc(t.refundedAmount) > 0n && (
                        <small> after {usd(t.refundedAmount)} refunded</small>
                      )}
                    </td>
                    <td>
                      <StatusBadge status={t.status} />
                    </td>
                    <td>
                      <code title={t.txHash}>{shortHash(t.txHash)}</code>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
          {loaded.data?.nextCursor && (
            <button
              type="button"
              class="outline"
              aria-busy={loaded.loading}
              onClick={() => setCursor(loaded.data!.nextCursor!)}
            >
              Load more
            </button>
          )}
        </>
      )}
    </section>
  );
}

export function TransactionPage(props: { id: string }) {
  const { api } = useDashboard();
  const detail = useLoad(
    () => api.request<TransactionDetail>('GET', `/api/v1/transactions/${props.id}`),
    [props.id],
  );
  const t = detail.data;
  return (
    <section aria-labelledby="txn-title">
      <p>
        <Link to="/money">← Money</Link>
      </p>
      <h1 id="txn-title">Transaction</h1>
      <ErrorNote error={detail.error} onRetry={detail.reload} />
      {!t ? (
        detail.loading && <Loading what="the transaction" />
      ) : (
        <>
          <dl class="facts">
            <dt>Id</dt>
            <dd>
              <code>{t.transactionId}</code> <CopyButton text={t.transactionId} label="transaction id" />
            </dd>
            <dt>Status</dt>
            <dd>
              <StatusBadge status={t.status} /> (escrow: {statusWords(t.escrowStatus)})
            </dd>
            <dt>Skill</dt>
            <dd>{t.skillName ?? '—'}</dd>
            <dt>Amount</dt>
            <dd data-testid="txn-amount">{usd(t.amount)}</dd>
            <dt>Your share · fee</dt>
            <dd>
              {usd(t.sellerAmount)} · {usd(t.platformFee)}
            </dd>
            <dt>You get, after refunds</dt>
            <dd data-testid="txn-net">{usd(sellerNet(t))}</dd>
            <dt>Refunded · refundable</dt>
            <dd data-testid="txn-refundable">
              {usd(t.refundedAmount)} · {usd(t.refundableAmount)}
            </dd>
            <dt>Payer</dt>
            <dd>
              <Address value={t.payer} label="payer address" />
            </dd>
            <dt>On chain</dt>
            <dd>
              <TxLink chainId={t.chainId} hash={t.txHash} /> (log {t.logIndex}, {t.network})
            </dd>
            <dt>Hold until</dt>
            <dd>{dateTime(t.holdUntil)}</dd>
            <dt>Settlement</dt>
            <dd>{t.settlementId ?? '—'}</dd>
          </dl>
          <h2>History</h2>
          <ol class="history">
            {t.history.map((h, i) => (
              <li key={i}>
                {dateTime(h.at)} — {statusWords(h.type)}
                {h.amount ? ` ${usd(h.amount)}` : ''}
              </li>
            ))}
          </ol>
          <h2>Refunds</h2>
          {t.refunds.length === 0 ? (
            <Empty>No refunds.</Empty>
          ) : (
            <ul>
              {t.refunds.map((r) => (
                <li key={r.refundId}>
                  {usd(r.amount)} — <StatusBadge status={r.status} /> — “{r.reason}” —{' '}
                  {r.refundTxHash ? <TxLink chainId={t.chainId} hash={r.refundTxHash} /> : 'transfer pending'}
                </li>
              ))}
            </ul>
          )}
          {t.status !== 'reversed' && parseUsdc(t.refundableAmount) > 0n && (
            <RefundForm transaction={t} onRefunded={detail.reload} />
          )}
        </>
      )}
    </section>
  );
}

function TxLink(props: { chainId: number; hash: string }) {
  const url = explorerTxUrl(props.chainId, props.hash);
  return (
    <span class="copyable">
      {url ? (
        <a href={url} target="_blank" rel="noopener noreferrer">
          <code>{shortHash(props.hash)}</code> (explorer)
        </a>
      ) : (
        <code class="wrap" title="local chain: no block explorer">
          {props.hash}
        </code>
      )}{' '}
      <CopyButton text={props.hash} label="transaction hash" />
    </span>
  );
}

function SettlementsSection() {
  const { api } = useDashboard();
  const [after, setAfter] = useState<string | undefined>();
  const [rows, setRows] = useState<Settlement[]>([]);
  const list = useLoad(async () => {
    const page = await api.request<Page<Settlement> & { hasMore?: boolean }>('GET', '/api/v1/settlements', {
      query: { limit: 20, starting_after: after },
    });
    setRows((earlier) => (after ? [...earlier, ...page.data] : page.data));
    return page;
  }, [after]);
  return (
    <section aria-labelledby="settlements-title">
      <h2 id="settlements-title">Settlements</h2>
      {list.data === undefined ? (
        <LoadState load={list} what="settlements">
          {() => null}
        </LoadState>
      ) : rows.length === 0 ? (
        <Empty>
          No settlements yet. Available money is paid out on your schedule once it reaches your minimum.
        </Empty>
      ) : (
        <section class="table-wrap" aria-label="Settlements (scrolls sideways)">
          <table class="striped">
            <caption class="visually-hidden">Settlements</caption>
            <thead>
              <tr>
                <th scope="col">Period</th>
                <th scope="col">Status</th>
                <th scope="col">Amount</th>
                <th scope="col">Tx hash</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((s) => (
                <tr key={s.settlementId}>
                  <td>{periodLabel(s.period)}</td>
                  <td>
                    <StatusBadge status={s.status} />
                    {s.skipReason && <small> {statusWords(s.skipReason)}</small>}
                    {s.failureReason && <small> {s.failureReason}</small>}
                  </td>
                  <td>{usd(s.amount ?? s.availableAmount)}</td>
                  <td>
                    {s.txHash ? (
                      <>
                        <code class="wrap">{s.txHash}</code>{' '}
                        <CopyButton text={s.txHash} label="settlement transaction hash" />
                      </>
                    ) : (
                      '—'
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
      {list.data?.nextCursor && (
        <button type="button" class="outline" onClick={() => setAfter(list.data!.nextCursor!)}>
          Load more
        </button>
      )}
    </section>
  );
}
