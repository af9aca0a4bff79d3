import '@picocss/pico/css/pico.min.css';
import './styles.css';
import { render } from 'preact';
import { App } from './App';
import { setBasePath } from './router';

const root = document.getElementById('app');
if (root) {
  setBasePath(root.dataset.basePath ?? '/dashboard');
  root.textContent = '';
  render(<App />, root);
}
