import { useEffect, useState } from 'preact/hooks';
import type { ApiClient } from './api';
import type { SignInResult } from './types';
import { ErrorNote, Notice, useAction } from './ui';
import {
  chooseWallet,
  type DiscoveredWallet,
  discoverWallets,
  type Eip1193Provider,
  signInWithWallet,
} from './wallet';

export function SignIn(props: {
  api: ApiClient;
  notice?: string;
  onSignedIn: (result: SignInResult) => void;
}) {
  const choices = useWalletChoices();
  const action = useAction();
  const signIn = async (wallet: Eip1193Provider) => {
    chooseWallet(wallet);
    await action.run(async () => props.onSignedIn(await signInWithWallet(wallet, props.api)));
  };
  const busy = action.busy;
  return (
    <main id="main" class="container sign-in">
      <article>
        <h1>Paygate seller dashboard</h1>
        <p>
          Sign in with your Ethereum wallet. Your wallet signs a one-time message (Sign-In with Ethereum); it
          costs nothing and sends no transaction. The first sign-in creates your seller account and shows your
          secret API key once.
        </p>
        {props.notice && <Notice>{props.notice}</Notice>}
        {choices.length ? (
          <div class="actions">
            {choices.map((choice) => (
              <button
                key={choice.key}
                type="button"
                onClick={() => signIn(choice.provider)}
                aria-busy={busy}
                disabled={busy}
              >
                {choice.label}
              </button>
            ))}
            {busy && <span role="status">Waiting for your wallet…</span>}
          </div>
        ) : (
          <p role="alert" class="error-note">
            No browser wallet found yet. Install or unlock a wallet extension (for example MetaMask or
            Coinbase Wallet): it appears here as soon as it announces itself.
          </p>
        )}
        <ErrorNote error={action.error} />
        <p>
          <small>
            Everything here is also in the REST API (<a href="/api/v1/openapi.json">OpenAPI document</a>),
            with your <code>sk_</code> key.
          </small>
        </p>
      </article>
    </main>
  );
}

/** Wallets announced by EIP-6963 first; a legacy injected window.ethereum when none announced itself. */
function useWalletChoices(): Array<{ key: string; label: string; provider: Eip1193Provider }> {
  const [wallets, setWallets] = useState<DiscoveredWallet[]>([]);
  useEffect(() => discoverWallets(setWallets), []);
  const legacy = (globalThis as { ethereum?: Eip1193Provider }).ethereum;
  return wallets.length
    ? wallets.map((w) => ({ key: w.info.uuid, label: `Sign in with ${w.info.name}`, provider: w.provider }))
    : legacy
      ? [{ key: 'legacy', label: 'Sign in with wallet', provider: legacy }]
      : [];
}
