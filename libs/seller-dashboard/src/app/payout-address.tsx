import { useState } from 'preact/hooks';
import { type ConfirmOptions, useConfirm } from './confirm';
import { useDashboard } from './context';
import { checksummed, dateTime } from './format';
import { toChecksumAddress } from './siwe';
import type { Account } from './types';
import { ActionNotes, Address, useAction } from './ui';
import { TextField } from './ui-forms';
import { browserWallet, signWithAccountWallet } from './wallet';

/** 172800 → "48 hours"; 90 → "2 minutes". */
function duration(seconds: number): string {
  if (seconds >= 2 * 86_400) return `${Math.round(seconds / 86_400)} days`;
  if (seconds >= 2 * 3600) return `${Math.round(seconds / 3600)} hours`;
  if (seconds >= 120) return `${Math.round(seconds / 60)} minutes`;
  return `${seconds} seconds`;
}

/** The payout address moves only with the account wallet's signature: a stolen session cannot redirect it. */
export function PayoutAddress(props: { account: Account; onSaved: (account: Account) => void }) {
  const a = props.account;
  const payout = usePayoutAddressChange(a, props.onSaved);
  const { action } = payout;
  return (
    <section aria-labelledby="payout-address-title">
      <h2 id="payout-address-title">Where payouts go</h2>
      <p data-testid="payout-current">
        Payouts go to <Address value={a.payoutAddress} label="payout address" />.
      </p>
      {a.pendingPayoutAddress && (
        <p data-testid="payout-pending">
          Changing to <Address value={a.pendingPayoutAddress.address} label="pending payout address" /> on{' '}
          {dateTime(a.pendingPayoutAddress.effectiveAt)}; until then payouts go to the address above.{' '}
          <button type="button" class="outline small" disabled={action.busy} onClick={payout.cancel}>
            Cancel change
          </button>
        </p>
      )}
      <ActionNotes action={action} unlessOnAField />
      <form
        onSubmit={(event) => {
          event.preventDefault();
          void payout.change();
        }}
      >
        <TextField
          id="acct-payoutAddress"
          label="Payout address"
          hint="your account wallet signs the change; it is announced to your webhook and takes effect after a delay"
          error={action.errors.payoutAddress}
          value={payout.address}
          onValue={payout.setAddress}
          input={{ name: 'payoutAddress' }}
        />
        <button type="submit" disabled={action.busy} aria-busy={action.busy}>
          Sign and change payout address
        </button>
      </form>
      {payout.confirm.dialog}
    </section>
  );
}

/** The address typed, its change (checked by the API, confirmed, signed by the wallet) and a pending one's cancel. */
function usePayoutAddressChange(a: Account, onSaved: (account: Account) => void) {
  const { api } = useDashboard();
  const [address, setAddress] = useState(checksummed(a.pendingPayoutAddress?.address ?? a.payoutAddress));
  const action = useAction();
  const confirm = useConfirm();
  const change = async () => {
    action.setNotice(undefined);
    const result = await action.run(async () => {
      // The API checks the address first (and names its rule); the seller then sees exactly what is signed.
      const challenge = await api.request<{ message: string; delaySeconds: number }>(
        'POST',
        '/api/v1/account/payout-address/challenge',
        { body: { payoutAddress: address.trim() } },
      );
      const checksummed = toChecksumAddress(address.trim());
      const answer = await confirm.ask(payoutChangeQuestion(a, checksummed, challenge.delaySeconds));
      if (!answer) return undefined;
      const signature = await signWithAccountWallet(browserWallet(), a.walletAddress, challenge.message);
      return api.request<{ account: Account; effectiveAt: string }>(
        'POST',
        '/api/v1/account/payout-address',
        {
          body: { message: challenge.message, signature },
        },
      );
    });
    if (!result) return;
    onSaved(result.account);
    action.setNotice(changedNotice(result.account, result.effectiveAt));
  };
  const cancel = async () => {
    action.setNotice(undefined);
    const cancelled = await action.run(() =>
      api.request<Account>('POST', '/api/v1/account/payout-address/cancel'),
    );
    if (!cancelled) return;
    onSaved(cancelled);
    setAddress(checksummed(cancelled.payoutAddress));
    action.setNotice('Pending payout address change cancelled.');
  };
  return { address, setAddress, action, confirm, change, cancel };
}

/** What the seller sees before the wallet signs: the full new address, the current one, and when it applies. */
function payoutChangeQuestion(a: Account, newAddress: string, delaySeconds: number): ConfirmOptions {
  const effectiveAt = new Date(Date.now() + delaySeconds * 1000);
  return {
    title: 'Send your payouts to a new address?',
    facts: [
      ['New payout address', <Address key="n" value={newAddress} label="new payout address" />],
      ['Current address', <Address key="c" value={a.payoutAddress} label="current payout address" />],
      ['Takes effect', `${dateTime(effectiveAt.toISOString())} (in ${duration(delaySeconds)})`],
    ],
    effect: (
      <>
        Until then every payout still goes to your current address, and you can cancel the change. Your
        webhook is told at once. Check every character of the new address: USDC sent to a wrong address cannot
        be recovered. Next, your account wallet <code>{a.walletAddress}</code> signs the change.
      </>
    ),
    confirmLabel: 'Sign with wallet',
  };
}

/** Where payouts go now and, for a pending change, from when: said after the change is signed. */
function changedNotice(account: Account, effectiveAt: string): string {
  return account.pendingPayoutAddress
    ? `Payout address change signed: payouts go to ${toChecksumAddress(account.pendingPayoutAddress.address)} from ${dateTime(effectiveAt)}. Until then they go to ${toChecksumAddress(account.payoutAddress)}. Your webhook was told.`
    : `Payout address changed: payouts go to ${toChecksumAddress(account.payoutAddress)}.`;
}
