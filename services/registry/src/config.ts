import { type CommonConfig, commonConfig } from '@paygate/runtime';

export interface RegistryConfig extends CommonConfig {}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): RegistryConfig {
  return { ...commonConfig(env, { serviceName: 'registry', schema: 'registry', port: 8081 }) };
}
