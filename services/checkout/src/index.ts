export { loadConfig } from './config';
export type { CheckoutDatabase } from './db';
export { startCheckout } from './service';
