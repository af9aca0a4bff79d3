export { loadConfig, type NotifierConfig } from './config';
export type { NotifierDatabase } from './db';
export { type RunningNotifier, startNotifier } from './service';
