import '@picocss/pico/css/pico.min.css';
import './styles.css';
import { render } from 'preact';
import { App } from './App';
import { takeHandOver } from './handover';
import { setBasePath } from './router';
import { saveSession } from './session';
import { chooseWallet, discoverWallets } from './wallet';

const root = document.getElementById('app');
// Wallets are listened for from the start: after a reload the signed-in page still knows the account wallet
// (for the payout-address signature), not only the sign-in screen.
discoverWallets(() => undefined);
if (root) {
  setBasePath(root.dataset.basePath ?? '/dashboard');
  // Signed in on the inlined first screen: the session is stored like the app's own sign-in stores it.
  const signedIn = takeHandOver();
  if (signedIn) {
    saveSession(signedIn.result);
    if (signedIn.wallet) chooseWallet(signedIn.wallet);
  }
  root.textContent = '';
  render(<App firstLogin={signedIn?.result.apiKey ? signedIn.result : undefined} />, root);
}
