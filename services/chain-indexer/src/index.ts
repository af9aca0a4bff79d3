export { loadConfig } from './config';
export { startChainIndexer } from './service';
