import { type CommonConfig, commonConfig } from '@paygate/runtime';

export interface SettlementConfig extends CommonConfig {}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): SettlementConfig {
  return { ...commonConfig(env, { serviceName: 'settlement', schema: 'settlement', port: 8086 }) };
}
