import { runMain } from '@paygate/runtime';
import { loadConfig } from './config';
import { startGatewayProxy } from './service';

void runMain('gateway-proxy', () => startGatewayProxy(loadConfig()));
