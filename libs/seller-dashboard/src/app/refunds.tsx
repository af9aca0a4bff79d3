import { formatUsdc, parseUsdc } from '@paygate/money';
import { useState } from 'preact/hooks';
import { newIdempotencyKey } from './api';
import { type ConfirmOptions, useConfirm } from './confirm';
import { useDashboard } from './context';
import { dateTime, usd } from './format';
import { BALANCE_EFFECT, refundEffect } from './refund-effect';
import type { Page, Refund, RefundRequest, TransactionDetail } from './types';
import {
  ActionNotes,
  Address,
  Empty,
  ErrorNote,
  Facts,
  Link,
  LoadState,
  Notice,
  StatusBadge,
  useAction,
  useLoad,
} from './ui';
import { fieldsOf, SelectField, TextField, useForm } from './ui-forms';

/** The confirmation every refund waits for: amount, payer, and what the seller's balance loses. */
function refundFacts(t: TransactionDetail, amount: string): Pick<ConfirmOptions, 'facts' | 'effect'> {
  const effect = refundEffect(t, amount);
  return {
    facts: [
      ['Refund', <strong key="a">{usd(amount)}</strong>],
      ['To the payer', <Address key="p" value={t.payer} label="payer address" />],
      [
        'Payment',
        `${usd(t.amount)} on ${dateTime(t.confirmedAt)}${t.skillName ? ` for ${t.skillName}` : ''}`,
      ],
      ['You keep of this payment', usd(effect.sellerKeeps)],
    ],
    effect: (
      <>
        Your balance goes down by <strong>{usd(effect.fromSeller)}</strong> (your 95% share; Paygate returns
        its {usd(effect.feeReturned)} fee), which {BALANCE_EFFECT[effect.balance]}. The USDC goes back to the
        payer on chain; this cannot be undone.
      </>
    ),
  };
}

/** What would remain refundable after refunding `amount`, or '' when the amount is not a valid one. */
function remainderAfter(refundable: string, amount: string): string {
  try {
    const left = parseUsdc(refundable) - parseUsdc(amount);
    return left >= 0n ? formatUsdc(left) : '';
  } catch {
    return '';
  }
}

/** The refund form's amount and reason, checked, confirmed, then booked once (one idempotency key a refund). */
function useRefundForm(t: TransactionDetail, onRefunded: () => void) {
  const { api } = useDashboard();
  const [values, set] = useForm({ amount: t.refundableAmount, reason: '' });
  const [key, setKey] = useState(newIdempotencyKey);
  const [done, setDone] = useState<Refund>();
  const [localErrors, setLocalErrors] = useState<Record<string, string>>({});
  const save = useAction();
  const confirm = useConfirm();
  const errors = { ...save.errors, ...localErrors };
  const amount = values.amount.trim();
  const remainder = remainderAfter(t.refundableAmount, values.amount);
  const submit = async (event: Event) => {
    event.preventDefault();
    const problems: Record<string, string> = {};
    if (!remainder || parseUsdc(amount || '0') === 0n)
      problems.amount = `Enter an amount above $0.00 and at most ${usd(t.refundableAmount)}`;
    if (!values.reason.trim()) problems.reason = 'Say why you refund (the buyer sees it)';
    setLocalErrors(problems);
    if (Object.keys(problems).length) {
      document.getElementById(problems.amount ? 'refund-amount' : 'refund-reason')?.focus();
      return;
    }
    const answer = await confirm.ask({
      title: amount === t.refundableAmount ? 'Refund in full?' : 'Refund part of this payment?',
      ...refundFacts(t, amount),
      confirmLabel: `Refund ${usd(amount)}`,
    });
    if (!answer) return;
    const refund = await save.run(() =>
      api.request<Refund>('POST', '/api/v1/refunds', {
        body: { transactionId: t.transactionId, amount, reason: values.reason.trim() },
        idempotencyKey: key,
      }),
    );
    if (!refund) return;
    setDone(refund);
    setKey(newIdempotencyKey());
    set({ amount: refund.remainingRefundable ?? '', reason: '' });
    onRefunded();
  };
  return {
    amount,
    set,
    field: fieldsOf('refund', values, set, errors),
    done,
    remainder,
    save,
    confirm,
    submit,
  };
}

export function RefundForm(props: { transaction: TransactionDetail; onRefunded: () => void }) {
  const t = props.transaction;
  const { amount, field, done, remainder, save, ...form } = useRefundForm(t, props.onRefunded);
  return (
    <form aria-labelledby="refund-title" onSubmit={form.submit} noValidate>
      <h2 id="refund-title">Refund</h2>
      {done && (
        <Notice>
          Refund of {usd(done.amount)} booked; the USDC goes back to the payer on chain.{' '}
          {usd(done.remainingRefundable)} remains refundable.
        </Notice>
      )}
      <div class="grid">
        <TextField
          {...field('amount')}
          label="Amount (USDC)"
          required
          hint={`up to ${usd(t.refundableAmount)}; ${remainder ? `${usd(remainder)} would remain refundable` : 'enter a valid amount'}`}
          input={{ inputMode: 'decimal' }}
        />
        <TextField {...field('reason')} label="Reason" required />
      </div>
      <ErrorNote error={save.error} unlessOnAField />
      <div class="actions">
        <button type="submit" disabled={save.busy} aria-busy={save.busy}>
          {amount === t.refundableAmount ? 'Refund in full' : 'Refund part'}
        </button>
        <button
          type="button"
          class="outline secondary"
          onClick={() => form.set({ amount: t.refundableAmount })}
        >
          Full amount
        </button>
      </div>
      {form.confirm.dialog}
    </form>
  );
}

type RequestRow = { request: RefundRequest; payment: TransactionDetail };

/** Buyers' refund requests, each with the payment it names: amount, payer, dates, what the seller keeps. */
export function RefundRequestsSection() {
  const { api } = useDashboard();
  const [status, setStatus] = useState('pending');
  const list = useLoad(
    async (): Promise<RequestRow[]> => {
      const page = await api.request<Page<RefundRequest>>('GET', '/api/v1/refund-requests', {
        query: { status: status || undefined },
      });
      const payments = await Promise.all(
        page.data.map((r) =>
          api.request<TransactionDetail>('GET', `/api/v1/transactions/${r.transactionId}`),
        ),
      );
      return page.data.map((request, i) => ({ request, payment: payments[i]! }));
    },
    [status],
    { live: true },
  );
  const decision = useRefundDecision(list.reload);
  return (
    <section aria-labelledby="rr-title">
      <h2 id="rr-title">Refund requests from buyers</h2>
      <SelectField id="rr-status" label="Show" value={status} onValue={setStatus}>
        <option value="pending">Waiting for you</option>
        <option value="approved">Approved</option>
        <option value="completed">Completed</option>
        <option value="rejected">Rejected</option>
        <option value="">All</option>
      </SelectField>
      <ActionNotes action={decision.action} />
      <LoadState load={list} what="refund requests">
        {(rows) =>
          rows.length === 0 ? (
            <Empty>No refund requests {status === 'pending' ? 'waiting for you' : 'here'}.</Empty>
          ) : (
            <ul class="cards">
              {rows.map((row) => (
                <RefundRequestCard
                  key={row.request.refundRequestId}
                  row={row}
                  busy={decision.action.busy}
                  onDecide={(choice) => decision.decide(row.request, row.payment, choice)}
                />
              ))}
            </ul>
          )
        }
      </LoadState>
      {decision.confirm.dialog}
    </section>
  );
}

/** Approves or rejects a request after its confirmation (a rejection with the seller's reason). */
function useRefundDecision(onDecided: () => void) {
  const { api } = useDashboard();
  const action = useAction();
  const confirm = useConfirm();
  const decide = async (
    request: RefundRequest,
    payment: TransactionDetail,
    decision: 'approve' | 'reject',
  ) => {
    action.setNotice(undefined);
    const answer = await confirm.ask(
      decision === 'approve'
        ? {
            title: 'Approve this refund request?',
            ...refundFacts(payment, payment.refundableAmount),
            confirmLabel: `Approve and refund ${usd(payment.refundableAmount)}`,
          }
        : rejectQuestion(request, payment),
    );
    if (!answer) return;
    const done = await action.run(() =>
      api.request('POST', `/api/v1/refund-requests/${request.refundRequestId}/${decision}`, {
        body: decision === 'reject' ? { reason: answer.input } : {},
        idempotencyKey: newIdempotencyKey(),
      }),
    );
    if (!done) return;
    action.setNotice(
      decision === 'approve'
        ? `Refund of ${usd(payment.refundableAmount)} to the payer booked.`
        : 'Refund request rejected; the buyer can read your reason.',
    );
    onDecided();
  };
  return { action, confirm, decide };
}

/** What the confirmation of a rejection shows, and the reason it asks for. */
function rejectQuestion(request: RefundRequest, payment: TransactionDetail): ConfirmOptions {
  return {
    title: 'Reject this refund request?',
    facts: [
      ['Asked back', usd(payment.refundableAmount)],
      ['Payer', <Address key="p" value={payment.payer} label="payer address" />],
      ['Their reason', `“${request.reason}”`],
    ],
    effect: `Nothing is refunded and your balance does not change. The buyer can read your reason.`,
    confirmLabel: 'Reject request',
    input: { label: 'Why you reject it', hint: 'the buyer sees this', required: true },
  };
}

/** One request: what is asked back of which payment, why, by whom, when; approve or reject while pending. */
function RefundRequestCard(props: {
  row: RequestRow;
  busy: boolean;
  onDecide: (decision: 'approve' | 'reject') => void;
}) {
  const { request: r, payment: p } = props.row;
  return (
    <li data-testid="refund-request">
      <p>
        <strong>{usd(r.refund?.amount ?? p.refundableAmount)}</strong> asked back of a{' '}
        <Link to={`/money/transactions/${r.transactionId}`}>{usd(p.amount)} payment</Link>
        {p.skillName ? ` for ${p.skillName}` : ''} · <StatusBadge status={r.status} />
      </p>
      <Facts
        class="facts compact"
        facts={[
          ['Reason', `“${r.reason}”`],
          ['Payer', <Address key="p" value={p.payer} label="payer address" />],
          ['Asked', dateTime(r.createdAt)],
          ['Paid', dateTime(p.confirmedAt)],
          r.status === 'pending' && [
            'You keep if approved',
            usd(refundEffect(p, p.refundableAmount).sellerKeeps),
          ],
        ]}
      />
      {r.status === 'pending' && (
        <span class="actions">
          <button type="button" class="small" disabled={props.busy} onClick={() => props.onDecide('approve')}>
            Approve full refund
          </button>
          <button
            type="button"
            class="small outline contrast"
            disabled={props.busy}
            onClick={() => props.onDecide('reject')}
          >
            Reject
          </button>
        </span>
      )}
    </li>
  );
}
