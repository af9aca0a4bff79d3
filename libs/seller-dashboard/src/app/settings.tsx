import { useState } from 'preact/hooks';
import { useDashboard } from './context';
import { Deliveries } from './deliveries';
import { WebhookEndpoints } from './endpoints';
import { Keys } from './keys';
import { PayoutAddress } from './payout-address';
import type { Account } from './types';
import { ErrorNote, LoadState, Notice, SecretOnce, useAction, useGet } from './ui';
import { fieldsOf, SelectField, TextField, useForm } from './ui-forms';

export function SettingsPage() {
  const account = useGet<Account>('/api/v1/account');
  const [secret, setSecret] = useState<{ label: string; value: string }>();
  if (secret)
    return <SecretOnce label={secret.label} value={secret.value} onDone={() => setSecret(undefined)} />;
  return (
    <>
      <h1>Settings</h1>
      {!account.data ? (
        <LoadState load={account} what="your settings" />
      ) : (
        <>
          <PayoutAddress account={account.data} onSaved={account.set} />
          <PayoutSettings account={account.data} onSaved={account.set} onSecret={setSecret} />
          <CheckoutSettings account={account.data} onSaved={account.set} />
          <Keys account={account.data} onChanged={account.reload} onSecret={setSecret} />
          <WebhookEndpoints onSecret={setSecret} />
          <Deliveries />
        </>
      )}
    </>
  );
}

/** A change of the account saved (PATCH /api/v1/account), and "saved" said until the form changes again. */
function useAccountSave(onSaved: (account: Account) => void) {
  const { api } = useDashboard();
  const [saved, setSaved] = useState(false);
  const save = useAction();
  const patch = async (event: Event, body: Record<string, unknown>) => {
    event.preventDefault();
    const result = await save.run(() =>
      api.request<{ account: Account; webhookSecret?: string }>('PATCH', '/api/v1/account', { body }),
    );
    if (!result) return undefined;
    setSaved(true);
    onSaved(result.account);
    return result;
  };
  return { saved, setSaved, save, errors: save.errors, patch };
}

/** `onSaved`: the account as saved (a secret shown once replaces the page, and the form comes back from it). */
function PayoutSettings(props: {
  account: Account;
  onSaved: (account: Account) => void;
  onSecret: (secret: { label: string; value: string }) => void;
}) {
  const { form, setForm, saved, setSaved, save, errors, submit } = usePayoutSettingsForm(props);
  // A change of the URL or the minimum clears "saved".
  const field = fieldsOf(
    'acct',
    form,
    (patch: Partial<typeof form>) => {
      setSaved(false);
      setForm(patch);
    },
    errors,
  );
  return (
    <section aria-labelledby="payout-title">
      <h2 id="payout-title">Settlements and webhooks</h2>
      <form onSubmit={submit}>
        {saved && <Notice>Settings saved.</Notice>}
        <ErrorNote error={save.error} unlessOnAField />
        <TextField
          {...field('webhookUrl')}
          label="Webhook URL"
          hint="Paygate posts signed events here (payments, refunds, payout-address changes); empty removes it"
          input={{ name: 'webhookUrl' }}
        />
        <div class="grid">
          <SelectField
            id="acct-settlementFrequency"
            label="Settlement frequency"
            error={errors.settlementFrequency}
            value={form.settlementFrequency}
            onValue={(value) => setForm({ settlementFrequency: value as Account['settlementFrequency'] })}
          >
            <option value="DAILY">Daily</option>
            <option value="WEEKLY">Weekly</option>
            <option value="MONTHLY">Monthly</option>
          </SelectField>
          <TextField
            {...field('minimumSettlement')}
            label="Minimum settlement (USDC)"
            hint="smaller balances wait for the next period"
            input={{ name: 'minimumSettlement' }}
          />
        </div>
        <button type="submit" disabled={save.busy} aria-busy={save.busy}>
          Save settings
        </button>
      </form>
    </section>
  );
}

/** The webhook URL and settlement settings being edited, and their save (a new webhook URL's secret shown once). */
function usePayoutSettingsForm(props: Parameters<typeof PayoutSettings>[0]) {
  const a = props.account;
  const [form, setForm] = useForm({
    webhookUrl: a.webhookUrl ?? '',
    settlementFrequency: a.settlementFrequency,
    minimumSettlement: a.minimumSettlement,
  });
  const accountSave = useAccountSave(props.onSaved);
  const submit = async (event: Event) => {
    const result = await accountSave.patch(event, {
      webhookUrl: form.webhookUrl.trim() === '' ? null : form.webhookUrl.trim(),
      settlementFrequency: form.settlementFrequency,
      minimumSettlement: form.minimumSettlement.trim(),
    });
    if (result?.webhookSecret)
      props.onSecret({ label: 'webhook signing secret', value: result.webhookSecret });
  };
  return { ...accountSave, form, setForm, submit };
}

/** How the seller's checkout sessions are told apart (a unique exact amount, or a deposit address each). */
function CheckoutSettings(props: { account: Account; onSaved: (account: Account) => void }) {
  const [matching, setMatching] = useState(props.account.checkoutMatching);
  const { saved, setSaved, save, errors, patch } = useAccountSave(props.onSaved);
  return (
    <section aria-labelledby="checkout-title">
      <h2 id="checkout-title">Checkout</h2>
      <form onSubmit={(event) => patch(event, { checkoutMatching: matching })}>
        {saved && <Notice>Checkout setting saved.</Notice>}
        <ErrorNote error={save.error} unlessOnAField />
        <SelectField
          id="acct-checkoutMatching"
          label="How buyers' payments are told apart"
          hint={
            matching === 'amount'
              ? 'Each session asks for a unique exact amount (your price plus less than one cent, e.g. 1.504217) sent to one Paygate checkout wallet. Switch if your buyers pay from exchanges that cannot send an exact amount.'
              : 'Each session gets its own deposit address and asks for exactly your price; Paygate moves what arrives into escrow.'
          }
          error={errors.checkoutMatching}
          value={matching}
          onValue={(value) => {
            setSaved(false);
            setMatching(value as Account['checkoutMatching']);
          }}
        >
          <option value="amount">Unique amount (default)</option>
          <option value="deposit_address">Deposit address per session</option>
        </SelectField>
        <button type="submit" disabled={save.busy} aria-busy={save.busy}>
          Save checkout setting
        </button>
      </form>
    </section>
  );
}
