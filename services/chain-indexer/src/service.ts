import { type RunningService, startService } from '@paygate/runtime';
import { migrations } from '../migrations';
import type { ChainIndexerConfig } from './config';

export function startChainIndexer(config: ChainIndexerConfig): Promise<RunningService> {
  return startService({ name: 'chain-indexer', config, migrations });
}
