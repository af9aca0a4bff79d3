import { type RunningService, startService } from '@paygate/runtime';
import { migrations } from '../migrations';
import type { NotifierConfig } from './config';

export function startNotifier(config: NotifierConfig): Promise<RunningService> {
  return startService({ name: 'notifier', config, migrations });
}
