import { type CommonConfig, commonConfig } from '@paygate/runtime';

export interface NotifierConfig extends CommonConfig {}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): NotifierConfig {
  return { ...commonConfig(env, { serviceName: 'notifier', schema: 'notifier', port: 8087 }) };
}
