export { loadConfig } from './config';
export { startCheckout } from './service';
