import { useState } from 'preact/hooks';
import type { ApiClient } from './api';
import type { SignInResult } from './types';
import { ErrorNote, Notice } from './ui';
import { browserWallet, signInWithWallet, WalletError } from './wallet';

export function SignIn(props: {
  api: ApiClient;
  notice?: string;
  onSignedIn: (result: SignInResult) => void;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [walletProblem, setWalletProblem] = useState<string>();
  const wallet = browserWallet();
  const signIn = async () => {
    if (!wallet) return;
    setBusy(true);
    setError(undefined);
    setWalletProblem(undefined);
    try {
      props.onSignedIn(await signInWithWallet(wallet, props.api));
    } catch (caught) {
      if (caught instanceof WalletError) setWalletProblem(caught.message);
      else setError(caught);
    } finally {
      setBusy(false);
    }
  };
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
        {wallet ? (
          <button type="button" onClick={signIn} aria-busy={busy} disabled={busy}>
            {busy ? 'Waiting for your wallet…' : 'Sign in with wallet'}
          </button>
        ) : (
          <p role="alert" class="error-note">
            No browser wallet found. Install a wallet extension (for example MetaMask or Coinbase Wallet),
            then reload this page.
          </p>
        )}
        {walletProblem && (
          <p role="alert" class="error-note">
            {walletProblem}
          </p>
        )}
        <ErrorNote error={error} />
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
