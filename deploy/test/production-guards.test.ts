/**
 * Production guards: with NODE_ENV=production every service refuses to start on a configuration that would lose
 * or misroute money or leave its operator routes open — a zero or missing escrow address, a public rate-limited
 * RPC polled every 50 ms, a missing operator token or webhook key, CONFIRMATIONS left to the gateway's and the
 * indexer's differing defaults. One check per service (libs/runtime productionGuards); the error names the
 * service, the variable and the rule.
 *
 *   npx jest deploy/test/production-guards
 */
import { loadConfig as chainIndexerConfig } from '@paygate/chain-indexer';
import { loadConfig as checkoutConfig } from '@paygate/checkout';
import { loadConfig as ledgerConfig } from '@paygate/escrow-ledger';
import { loadConfig as gatewayConfig } from '@paygate/gateway-proxy';
import { loadConfig as notifierConfig } from '@paygate/notifier';
import { loadConfig as registryConfig } from '@paygate/registry';
import { loadConfig as settlementConfig } from '@paygate/settlement';
import { spawnTsProcess, testWallets } from '@paygate/testing';

const ZERO = '0x0000000000000000000000000000000000000000';

/** A production environment every service accepts: Base, a provider RPC, real-looking secrets. */
const PRODUCTION: NodeJS.ProcessEnv = {
  NODE_ENV: 'production',
  CHAIN_NETWORK: 'base',
  CHAIN_RPC_URL: 'https://base-mainnet.rpc-provider.example/v2/key',
  ESCROW_ADDRESS: testWallets.escrow.address,
  CONFIRMATIONS: '3',
  OPERATOR_TOKEN: 'op-7c1f0e9a2b4d6c8e0f1a3b5d',
  SESSION_SECRET: 'sess-1b3d5f7a9c0e2a4c6e8a0c2e4a6c8e0a',
  SECRETS_ENCRYPTION_KEY: 'wh-9e7c5a3f1d0b2e4c6a8f0d2b4e6c8a0f',
  TICKET_KEY_ENCRYPTION_KEY: 'tk-4b8e1c7a0f3d6b9e2a5c8f1d4b7e0a3c',
  ESCROW_PRIVATE_KEY: testWallets.escrow.privateKey,
};

const LOADERS: Record<string, (env: NodeJS.ProcessEnv) => unknown> = {
  registry: (env) => registryConfig(env),
  'gateway-proxy': (env) => gatewayConfig(env),
  checkout: (env) => checkoutConfig(env),
  'chain-indexer': (env) => chainIndexerConfig(env),
  'escrow-ledger': (env) => ledgerConfig(env),
  settlement: (env) => settlementConfig(env),
  notifier: (env) => notifierConfig(env),
};

function refusal(service: string, env: NodeJS.ProcessEnv): string {
  try {
    LOADERS[service]!(env);
  } catch (error) {
    return (error as Error).message;
  }
  return 'accepted';
}

function without(...names: string[]): NodeJS.ProcessEnv {
  const env = { ...PRODUCTION };
  for (const name of names) delete env[name];
  return env;
}

describe('production guards', () => {
  it.each(Object.keys(LOADERS))('%s starts on a complete production configuration', (service) => {
    expect(refusal(service, PRODUCTION)).toBe('accepted');
  });

  const ESCROW_USERS = ['gateway-proxy', 'checkout', 'chain-indexer', 'escrow-ledger'];

  it.each(ESCROW_USERS)('%s refuses a zero or missing ESCROW_ADDRESS', (service) => {
    expect(refusal(service, { ...PRODUCTION, ESCROW_ADDRESS: ZERO })).toContain(
      `invalid production configuration of ${service}: ESCROW_ADDRESS: must not be the zero address in production`,
    );
    expect(refusal(service, without('ESCROW_ADDRESS'))).toMatch(
      /ESCROW_ADDRESS: (must be set to the escrow wallet in production|is required)/,
    );
  });

  it('settlement refuses an ESCROW_ADDRESS of zero (its own defaults to its key)', () => {
    expect(refusal('settlement', { ...PRODUCTION, ESCROW_ADDRESS: ZERO })).toMatch(/ESCROW_ADDRESS/);
    expect(refusal('settlement', without('ESCROW_ADDRESS'))).toBe('accepted');
  });

  it('chain-indexer refuses a public rate-limited RPC polled every 50 ms, accepts it polled every second', () => {
    expect(refusal('chain-indexer', { ...PRODUCTION, CHAIN_RPC_URL: 'https://mainnet.base.org' })).toBe(
      'invalid production configuration of chain-indexer: CHAIN_RPC_URL: mainnet.base.org is a public ' +
        "rate-limited endpoint; with POLL_INTERVAL_MS=50 it is throttled in production: use a provider's " +
        'endpoint or set POLL_INTERVAL_MS to at least 1000',
    );
    expect(
      refusal('chain-indexer', {
        ...PRODUCTION,
        CHAIN_RPC_URL: 'https://mainnet.base.org',
        POLL_INTERVAL_MS: '1000',
      }),
    ).toBe('accepted');
    expect(
      refusal('settlement', {
        ...PRODUCTION,
        CHAIN_RPC_URL: 'https://sepolia.base.org',
        CHAIN_NETWORK: 'base-sepolia',
        TRANSFER_POLL_INTERVAL_MS: '50',
      }),
    ).toContain('of settlement: CHAIN_RPC_URL: sepolia.base.org is a public rate-limited endpoint');
  });

  it.each(['registry', 'checkout', 'escrow-ledger', 'settlement'])(
    '%s refuses a missing, short or development OPERATOR_TOKEN',
    (service) => {
      expect(refusal(service, without('OPERATOR_TOKEN'))).toMatch(/OPERATOR_TOKEN/);
      expect(refusal(service, { ...PRODUCTION, OPERATOR_TOKEN: 'short-token-0123' })).toMatch(
        /OPERATOR_TOKEN: must be at least (16|24) characters/,
      );
      expect(refusal(service, { ...PRODUCTION, OPERATOR_TOKEN: 'dev-operator-token-not-secret' })).toContain(
        `invalid production configuration of ${service}: OPERATOR_TOKEN: must not be a development value`,
      );
    },
  );

  it('registry refuses a missing webhook key (SECRETS_ENCRYPTION_KEY encrypts the webhook secrets)', () => {
    expect(refusal('registry', without('SECRETS_ENCRYPTION_KEY'))).toBe(
      'invalid production configuration of registry: SECRETS_ENCRYPTION_KEY: must be set in production (no default)',
    );
  });

  it.each(['gateway-proxy', 'chain-indexer'])(
    '%s refuses its own CONFIRMATIONS default (the gateway and the indexer would count differently)',
    (service) => {
      expect(refusal(service, without('CONFIRMATIONS'))).toContain(
        `invalid production configuration of ${service}: CONFIRMATIONS: must be set in production, the same value for gateway-proxy and chain-indexer`,
      );
    },
  );

  it('names every broken rule of a service at once', () => {
    const message = refusal('chain-indexer', {
      ...without('CONFIRMATIONS'),
      ESCROW_ADDRESS: ZERO,
      CHAIN_RPC_URL: 'https://mainnet.base.org',
    });
    expect(message).toMatch(/ESCROW_ADDRESS: .*; CHAIN_RPC_URL: .*; CONFIRMATIONS: /);
  });

  it('outside production the development defaults still start', () => {
    expect(
      refusal('chain-indexer', {
        CHAIN_RPC_URL: 'https://mainnet.base.org',
        ESCROW_ADDRESS: ZERO,
        USDC_ADDRESS: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
      }),
    ).toBe('accepted');
  });

  it('a service process refuses to start, exit code 1, with the one error line', async () => {
    const indexer = spawnTsProcess('services/chain-indexer/src/main.ts', {
      ...PRODUCTION,
      CHAIN_RPC_URL: 'https://mainnet.base.org',
      LOG_LEVEL: 'info',
    });
    expect(await indexer.exited).toBe(1);
    expect(indexer.output()).toContain(
      'invalid production configuration of chain-indexer: CHAIN_RPC_URL: mainnet.base.org is a public rate-limited endpoint',
    );
  }, 30_000);
});
