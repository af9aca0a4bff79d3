import { runMain } from '@paygate/runtime';
import { loadConfig } from './config';
import { startCheckout } from './service';

void runMain('checkout', () => startCheckout(loadConfig()));
