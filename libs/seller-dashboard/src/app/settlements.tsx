import { statusWords, usd } from './format';
import { periodLabel } from './overview';
import type { Settlement } from './types';
import { CopyButton, Empty, LoadMore, LoadState, StatusBadge, usePages } from './ui';
import { ScrollTable } from './ui-tables';

export function SettlementsSection() {
  const { list, rows, more } = usePages<Settlement>(
    '/api/v1/settlements',
    { limit: 20 },
    { param: 'starting_after', live: false },
  );
  return (
    <section aria-labelledby="settlements-title">
      <h2 id="settlements-title">Settlements</h2>
      {list.data === undefined ? (
        <LoadState load={list} what="settlements" />
      ) : rows.length === 0 ? (
        <Empty>
          No settlements yet. Available money is paid out on your schedule once it reaches your minimum.
        </Empty>
      ) : (
        <ScrollTable label="Settlements" columns={['Period', 'Status', 'Amount', 'Tx hash']} class="striped">
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
        </ScrollTable>
      )}
      <LoadMore load={list} onMore={more} />
    </section>
  );
}
