export { loadConfig } from './config';
export { type RunningSettlement, startSettlement } from './service';
