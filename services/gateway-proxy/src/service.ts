import { type RunningService, startService } from '@paygate/runtime';
import { migrations } from '../migrations';
import type { GatewayProxyConfig } from './config';

export function startGatewayProxy(config: GatewayProxyConfig): Promise<RunningService> {
  return startService({ name: 'gateway-proxy', config, migrations });
}
