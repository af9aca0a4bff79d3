import { type RunningService, startService } from '@paygate/runtime';
import { migrations } from '../migrations';
import type { CheckoutConfig } from './config';

export function startCheckout(config: CheckoutConfig): Promise<RunningService> {
  return startService({ name: 'checkout', config, migrations });
}
