import { parseUsdc } from '@paygate/money';
import { useMemo, useState } from 'preact/hooks';
import { plainMessage, type Query } from './api';
import { CallNote } from './call-note';
import { PaymentsChart } from './chart';
import { useDashboard } from './context';
import { transactionsCsv } from './csv';
import { dateTime, shortHash, statusWords, usd } from './format';
import { fetchAll, useRecentPayments } from './overview-page';
import { sellerNet } from './refund-effect';
import { matchHash, partialHash, type TransactionFilters, transactionQuery } from './transactions';
import type { Page, Skill, Transaction } from './types';
import { Empty, Link, LoadMore, LoadState, StatusBadge, useLoad, usePages } from './ui';
import { SelectField, TextField } from './ui-forms';
import { ScrollTable } from './ui-tables';

const TRANSACTION_STATUSES = [
  'held',
  'available',
  'settling',
  'settled',
  'partially_refunded',
  'refunded',
  'reversed',
].map((status): [string, string] => [status, statusWords(status)]);
const PAGE_SIZE = 50;

export function TransactionsSection() {
  const [filters, setFilters] = useState<TransactionFilters>({});
  // Dates, skill, status and a whole tx hash are filtered by the API; a partial hash over the rows loaded.
  const query = transactionQuery(filters);
  const pages = usePages<Transaction>('/api/v1/transactions', { ...query, limit: PAGE_SIZE });
  const loaded = pages.list;
  const recent = useRecentPayments();
  const filtered = useMemo(() => matchHash(pages.rows, partialHash(filters.txHash)), [pages.rows, filters]);
  const set = (patch: Partial<TransactionFilters>) => {
    setFilters({ ...filters, ...patch });
    pages.first();
  };
  return (
    <section aria-labelledby="transactions-title">
      <h2 id="transactions-title">Payments</h2>
      {recent.data && <PaymentsChart payments={recent.data} />}
      <TransactionFilterForm filters={filters} onChange={set} />
      {loaded.data === undefined ? (
        <LoadState load={loaded} what="payments" />
      ) : filtered.length === 0 ? (
        <Empty>
          {Object.values(filters).every((v) => !v)
            ? 'No payments yet. When a buyer pays one of your skills, it appears here within seconds.'
            : 'No transaction matches these filters.'}
        </Empty>
      ) : (
        <>
          <TransactionsSummary
            count={filtered.length}
            more={Boolean(loaded.data?.nextCursor)}
            query={query}
            txHash={filters.txHash}
          />
          <TransactionsTable rows={filtered} />
          <LoadMore load={loaded} onMore={pages.more} />
        </>
      )}
    </section>
  );
}

/** Dates, skill, status and a transaction hash (whole or partial). */
function TransactionFilterForm(props: {
  filters: TransactionFilters;
  onChange: (patch: Partial<TransactionFilters>) => void;
}) {
  const { api } = useDashboard();
  const { filters } = props;
  // A filter's value, and its change (an emptied filter is no filter).
  const bind = (key: keyof TransactionFilters) => ({
    value: filters[key] ?? '',
    onValue: (value: string) => props.onChange({ [key]: value || undefined }),
  });
  const skills = useLoad(
    () =>
      api
        .request<Page<Skill>>('GET', '/api/v1/manage/skills', { query: { limit: 100 } })
        .then((page) => page.data.map((skill) => skill.name).sort()),
    [],
  );
  return (
    <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Filter transactions">
      <div class="grid">
        <TextField id="f-from" label="From" {...bind('from')} input={{ type: 'date' }} />
        <TextField id="f-to" label="To" {...bind('to')} input={{ type: 'date' }} />
        <SelectField id="f-skill" label="Skill" {...bind('skill')} options={skills.data ?? []}>
          <option value="">All skills</option>
        </SelectField>
        <SelectField id="f-status" label="Status" {...bind('status')} options={TRANSACTION_STATUSES}>
          <option value="">Any status</option>
        </SelectField>
        <TextField id="f-hash" label="Transaction hash" {...bind('txHash')} input={{ placeholder: '0x…' }} />
      </div>
    </form>
  );
}

/** How many transactions are shown, and their CSV export (every match, not only the rows loaded). */
function TransactionsSummary(props: {
  count: number;
  more: boolean;
  query: Query;
  txHash: string | undefined;
}) {
  const { api } = useDashboard();
  const [exporting, setExporting] = useState(false);
  const [exportError, setExportError] = useState<unknown>();
  const exportCsv = async () => {
    setExporting(true);
    setExportError(undefined);
    try {
      const all = matchHash(await fetchAll(api, props.query), partialHash(props.txHash));
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
    <>
      <p role="status">
        {props.count} transaction{props.count === 1 ? '' : 's'}
        {props.more ? ' shown, more below' : ''}.{' '}
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
    </>
  );
}

function TransactionsTable(props: { rows: Transaction[] }) {
  const now = new Date();
  return (
    <ScrollTable
      label="Transactions"
      columns={['Date', 'Skill', 'Amount', 'You get', 'Status', 'Tx']}
      class="striped"
    >
      {props.rows.map((t) => (
        <tr key={t.transactionId}>
          <td>
            <Link to={`/money/transactions/${t.transactionId}`}>{dateTime(t.confirmedAt)}</Link>
          </td>
          <td>{t.skillName ?? '—'}</td>
          <td>{usd(t.amount)}</td>
          <td>
            {usd(sellerNet(t))}
            {parseUsdc(t.refundedAmount) > 0n && <small> after {usd(t.refundedAmount)} refunded</small>}
          </td>
          <td>
            <StatusBadge status={t.status} />
            <CallNote transaction={t} now={now} />
          </td>
          <td>
            <code title={t.txHash}>{shortHash(t.txHash)}</code>
          </td>
        </tr>
      ))}
    </ScrollTable>
  );
}
