import { runMain } from '@paygate/runtime';
import { loadConfig } from './config';
import { startChainIndexer } from './service';

void runMain('chain-indexer', () => startChainIndexer(loadConfig()));
