import { type RunningService, startService } from '@paygate/runtime';
import { migrations } from '../migrations';
import type { RegistryConfig } from './config';

export function startRegistry(config: RegistryConfig): Promise<RunningService> {
  return startService({ name: 'registry', config, migrations });
}
