import { parseUsdc } from '@paygate/money';
import { CallNote } from './call-note';
import { dateTime, explorerTxUrl, shortHash, statusWords, usd } from './format';
import { sellerNet } from './refund-effect';
import { RefundForm } from './refunds';
import { callOutcomeDetail } from './transactions';
import type { TransactionDetail } from './types';
import { Address, CopyButton, Empty, ErrorNote, Facts, Link, Loading, StatusBadge, useGet } from './ui';

export function TransactionPage(props: { id: string }) {
  const detail = useGet<TransactionDetail>(`/api/v1/transactions/${props.id}`);
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
          <TransactionFacts transaction={t} />
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

/** Amounts, the seller's share after refunds, the payer and the transfer on chain. */
function TransactionFacts(props: { transaction: TransactionDetail }) {
  const t = props.transaction;
  const now = new Date();
  return (
    <Facts
      facts={[
        [
          'Id',
          <>
            <code>{t.transactionId}</code> <CopyButton text={t.transactionId} label="transaction id" />
          </>,
        ],
        [
          'Status',
          <>
            <StatusBadge status={t.status} /> (escrow: {statusWords(t.escrowStatus)})
          </>,
        ],
        t.callFailedAt && [
          "Seller's answer",
          <>
            <CallNote transaction={t} now={now} /> {callOutcomeDetail(t, now)}
          </>,
          'txn-call',
        ],
        ['Skill', t.skillName ?? '—'],
        ['Amount', usd(t.amount), 'txn-amount'],
        ['Your share · fee', `${usd(t.sellerAmount)} · ${usd(t.platformFee)}`],
        ['You get, after refunds', usd(sellerNet(t)), 'txn-net'],
        ['Refunded · refundable', `${usd(t.refundedAmount)} · ${usd(t.refundableAmount)}`, 'txn-refundable'],
        ['Payer', <Address key="p" value={t.payer} label="payer address" />],
        [
          'On chain',
          <>
            <TxLink chainId={t.chainId} hash={t.txHash} /> (log {t.logIndex}, {t.network})
          </>,
        ],
        ['Hold until', dateTime(t.holdUntil)],
        ['Settlement', t.settlementId ?? '—'],
      ]}
    />
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
