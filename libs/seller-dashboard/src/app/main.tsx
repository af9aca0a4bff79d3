import '@picocss/pico/css/pico.min.css';
import './styles.css';
import { render } from 'preact';
import { App } from './App';
import { setBasePath } from './router';
import { discoverWallets } from './wallet';

const root = document.getElementById('app');
// Wallets are listened for from the start: after a reload the signed-in page still knows the account wallet
// (for the payout-address signature), not only the sign-in screen.
discoverWallets(() => undefined);
if (root) {
  setBasePath(root.dataset.basePath ?? '/dashboard');
  root.textContent = '';
  render(<App />, root);
}
