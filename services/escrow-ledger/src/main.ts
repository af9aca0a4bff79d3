import { runMain } from '@paygate/runtime';
import { loadConfig } from './config';
import { startEscrowLedger } from './service';

void runMain('escrow-ledger', () => startEscrowLedger(loadConfig()));
