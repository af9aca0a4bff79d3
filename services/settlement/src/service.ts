import { type RunningService, startService } from '@paygate/runtime';
import { migrations } from '../migrations';
import type { SettlementConfig } from './config';

export function startSettlement(config: SettlementConfig): Promise<RunningService> {
  return startService({ name: 'settlement', config, migrations });
}
