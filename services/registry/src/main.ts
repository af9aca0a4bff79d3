import { runMain } from '@paygate/runtime';
import { loadConfig } from './config';
import { startRegistry } from './service';

void runMain('registry', () => startRegistry(loadConfig()));
