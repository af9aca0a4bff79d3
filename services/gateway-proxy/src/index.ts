export { loadConfig } from './config';
export { type RunningGateway, startGatewayProxy } from './service';
export { encodeX402Header } from './x402/protocol';
