import '@picocss/pico/css/pico.min.css';
import './styles.css';
import { render } from 'preact';
import { App } from './App';
import { takeHandOver } from './handover';
import { setBasePath } from './router';
import { saveSession } from './session';
import { chooseWallet, discoverWallets } from './wallet';

const root = document.getElementById('app');
// Listened for from the start: after a reload the page still knows the account wallet (payout-address change).
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
