import { type CommonConfig, commonConfig } from '@paygate/runtime';

export interface EscrowLedgerConfig extends CommonConfig {}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): EscrowLedgerConfig {
  return { ...commonConfig(env, { serviceName: 'escrow-ledger', schema: 'ledger', port: 8085 }) };
}
