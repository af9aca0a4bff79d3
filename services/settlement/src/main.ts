import { runMain } from '@paygate/runtime';
import { loadConfig } from './config';
import { startSettlement } from './service';

void runMain('settlement', () => startSettlement(loadConfig()));
