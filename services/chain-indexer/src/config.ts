import { type CommonConfig, commonConfig } from '@paygate/runtime';

export interface ChainIndexerConfig extends CommonConfig {}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): ChainIndexerConfig {
  return { ...commonConfig(env, { serviceName: 'chain-indexer', schema: 'indexer', port: 8084 }) };
}
