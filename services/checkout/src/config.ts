import { type CommonConfig, commonConfig } from '@paygate/runtime';

export interface CheckoutConfig extends CommonConfig {}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): CheckoutConfig {
  return { ...commonConfig(env, { serviceName: 'checkout', schema: 'checkout', port: 8083 }) };
}
