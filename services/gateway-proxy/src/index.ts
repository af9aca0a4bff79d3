export { encodeX402Header } from '@paygate/protocol';
export { loadConfig } from './config';
export { type RunningGateway, startGatewayProxy } from './service';
