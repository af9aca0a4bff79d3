import { type CommonConfig, commonConfig } from '@paygate/runtime';

export interface GatewayProxyConfig extends CommonConfig {}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): GatewayProxyConfig {
  return { ...commonConfig(env, { serviceName: 'gateway-proxy', schema: 'gateway', port: 8082 }) };
}
