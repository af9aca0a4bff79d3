export { loadConfig } from './config';
export { reconcile } from './reconciliation/reconcile';
export { type RunningEscrowLedger, startEscrowLedger } from './service';
