export { loadConfig, type NotifierConfig } from './config';
export { type RunningNotifier, startNotifier } from './service';
