import { parseUsdc } from '@paygate/money';
import { CallNote } from './call-note';
import { dateTime, explorerTxUrl, shortHash, statusWords, usd } from './format';
import { sellerNet } from './refund-effect';
import { RefundForm } from './refunds';
import { callOutcomeDetail } from './transactions';
import type { TransactionDetail } from './types';
import { Address, CopyButton, Empty, ErrorNote, Link, Loading, StatusBadge, useGet } from './ui';

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
    <dl class="facts">
      <dt>Id</dt>
      <dd>
        <code>{t.transactionId}</code> <CopyButton text={t.transactionId} label="transaction id" />
      </dd>
      <dt>Status</dt>
      <dd>
        <StatusBadge status={t.status} /> (escrow: {statusWords(t.escrowStatus)})
      </dd>
      {t.callFailedAt && (
        <>
          <dt>Seller's answer</dt>
          <dd data-testid="txn-call">
            <CallNote transaction={t} now={now} /> {callOutcomeDetail(t, now)}
          </dd>
        </>
      )}
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
