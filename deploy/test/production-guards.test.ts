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
import { spawnTsProcess } from '@paygate/testing';
import { HDNodeWallet, Wallet } from 'ethers';

const ZERO = '0x0000000000000000000000000000000000000000';

/** Production keys are never the public dev ones: a fresh escrow key per run. */
const ESCROW = Wallet.createRandom();
const RELAYER = Wallet.createRandom();
const CHECKOUT_ESCROW = Wallet.createRandom();
/** The session deposit addresses' key: settlement holds the private node, checkout only its public half. */
const DEPOSIT_NODE = HDNodeWallet.createRandom(undefined, "m/44'/60'/1'/0");

/** The ten accounts anvil and Hardhat derive from their public mnemonic: everyone holds these keys. */
const ANVIL_MNEMONIC = 'test test test test test test test test test test test junk';
const PUBLIC_DEV_KEYS = Array.from(
  { length: 10 },
  (_, index) => HDNodeWallet.fromPhrase(ANVIL_MNEMONIC, undefined, `m/44'/60'/0'/0/${index}`).privateKey,
);

/** A production environment every service accepts: Base, a provider RPC, real-looking secrets. */
const PRODUCTION: NodeJS.ProcessEnv = {
  NODE_ENV: 'production',
  CHAIN_NETWORK: 'base',
  CHAIN_RPC_URL: 'https://base-mainnet.rpc-provider.example/v2/key',
  ESCROW_ADDRESS: ESCROW.address,
  CONFIRMATIONS: '3',
  OPERATOR_TOKEN: 'op-7c1f0e9a2b4d6c8e0f1a3b5d',
  SESSION_SECRET: 'sess-1b3d5f7a9c0e2a4c6e8a0c2e4a6c8e0a',
  SECRETS_ENCRYPTION_KEY: 'wh-9e7c5a3f1d0b2e4c6a8f0d2b4e6c8a0f',
  TICKET_KEY_ENCRYPTION_KEY: 'tk-4b8e1c7a0f3d6b9e2a5c8f1d4b7e0a3c',
  RECEIPT_SIGNING_KEY: '0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318',
  ESCROW_PRIVATE_KEY: ESCROW.privateKey,
  RELAYER_PRIVATE_KEY: RELAYER.privateKey,
  MAX_TRANSFER_USDC: '5000',
  CHECKOUT_ESCROW_ADDRESS: CHECKOUT_ESCROW.address,
  CHECKOUT_ESCROW_PRIVATE_KEY: CHECKOUT_ESCROW.privateKey,
  CHECKOUT_DEPOSIT_XPUB: DEPOSIT_NODE.neuter().extendedKey,
  CHECKOUT_DEPOSIT_XPRV: DEPOSIT_NODE.extendedKey,
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

  it('checkout refuses a missing or public-test deposit xpub, a zero or shared CHECKOUT_ESCROW_ADDRESS; settlement a missing or public deposit key', () => {
    expect(refusal('checkout', without('CHECKOUT_DEPOSIT_XPUB'))).toContain(
      'invalid production configuration of checkout: CHECKOUT_DEPOSIT_XPUB: must be set in production',
    );
    const publicNode = HDNodeWallet.fromPhrase(ANVIL_MNEMONIC, undefined, "m/44'/60'/1'/0");
    expect(
      refusal('checkout', { ...PRODUCTION, CHECKOUT_DEPOSIT_XPUB: publicNode.neuter().extendedKey }),
    ).toContain('CHECKOUT_DEPOSIT_XPUB: is derived from the public test mnemonic');
    // The checkout wallet amount-matched sessions are paid to: required, never zero nor the agent escrow.
    expect(refusal('checkout', without('CHECKOUT_ESCROW_ADDRESS'))).toContain(
      'CHECKOUT_ESCROW_ADDRESS: must be set in production',
    );
    expect(refusal('checkout', { ...PRODUCTION, CHECKOUT_ESCROW_ADDRESS: ZERO })).toContain(
      'CHECKOUT_ESCROW_ADDRESS: must not be the zero address in production',
    );
    expect(refusal('checkout', { ...PRODUCTION, CHECKOUT_ESCROW_ADDRESS: ESCROW.address })).toContain(
      'CHECKOUT_ESCROW_ADDRESS: must differ from ESCROW_ADDRESS',
    );
    // The indexer (which watches it) and the ledger (which reconciles it) must know the same checkout wallet.
    for (const service of ['chain-indexer', 'escrow-ledger'] as const) {
      expect(refusal(service, without('CHECKOUT_ESCROW_ADDRESS'))).toContain(
        'CHECKOUT_ESCROW_ADDRESS: must be set in production',
      );
      expect(refusal(service, { ...PRODUCTION, CHECKOUT_ESCROW_ADDRESS: ZERO })).toContain(
        'CHECKOUT_ESCROW_ADDRESS: must not be the zero address in production',
      );
    }
    expect(refusal('settlement', without('CHECKOUT_ESCROW_PRIVATE_KEY'))).toContain(
      'CHECKOUT_ESCROW_PRIVATE_KEY: must be set in production',
    );
    expect(
      refusal('settlement', { ...PRODUCTION, CHECKOUT_ESCROW_PRIVATE_KEY: ESCROW.privateKey }),
    ).toContain('CHECKOUT_ESCROW_PRIVATE_KEY: must not be the escrow key');
    expect(refusal('settlement', without('CHECKOUT_DEPOSIT_XPRV'))).toContain(
      'CHECKOUT_DEPOSIT_MNEMONIC or CHECKOUT_DEPOSIT_XPRV: must be set in production',
    );
    const { CHECKOUT_DEPOSIT_XPRV: _xprv, ...withoutXprv } = PRODUCTION;
    expect(refusal('settlement', { ...withoutXprv, CHECKOUT_DEPOSIT_MNEMONIC: ANVIL_MNEMONIC })).toContain(
      'is the public test mnemonic',
    );
    expect(refusal('settlement', { ...PRODUCTION, CHECKOUT_DEPOSIT_XPRV: publicNode.extendedKey })).toContain(
      'is the public test mnemonic',
    );
    // Without the relayer nothing would move the deposits into escrow.
    expect(refusal('settlement', without('RELAYER_PRIVATE_KEY'))).toContain(
      'RELAYER_PRIVATE_KEY: must be set in production',
    );
  });

  it('settlement refuses an ESCROW_ADDRESS of zero (its own defaults to its key)', () => {
    expect(refusal('settlement', { ...PRODUCTION, ESCROW_ADDRESS: ZERO })).toMatch(/ESCROW_ADDRESS/);
    expect(refusal('settlement', without('ESCROW_ADDRESS'))).toBe('accepted');
  });

  it('escrow-ledger refuses CHAIN_CONFIRM_TIMEOUT_MS=0 (it would release payments the chain has not confirmed)', () => {
    expect(refusal('escrow-ledger', { ...PRODUCTION, CHAIN_CONFIRM_TIMEOUT_MS: '0' })).toMatch(
      /CHAIN_CONFIRM_TIMEOUT_MS/,
    );
    expect(refusal('escrow-ledger', { ...PRODUCTION, CHAIN_CONFIRM_TIMEOUT_MS: '600000' })).toBe('accepted');
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

  it.each(PUBLIC_DEV_KEYS.map((key, index) => [index, key] as const))(
    'settlement refuses public dev account #%i (anvil/Hardhat mnemonic) as escrow or relayer key',
    (_index, key) => {
      const address = new Wallet(key).address;
      expect(
        refusal('settlement', { ...PRODUCTION, ESCROW_PRIVATE_KEY: key, ESCROW_ADDRESS: address }),
      ).toContain(
        'invalid production configuration of settlement: ESCROW_PRIVATE_KEY: must not be a public anvil/Hardhat development key in production',
      );
      expect(refusal('settlement', { ...PRODUCTION, RELAYER_PRIVATE_KEY: key })).toContain(
        'RELAYER_PRIVATE_KEY: must not be a public anvil/Hardhat development key in production',
      );
      // Unprefixed or upper-case, the same key.
      expect(
        refusal('settlement', { ...PRODUCTION, RELAYER_PRIVATE_KEY: key.slice(2).toUpperCase() }),
      ).toMatch(/RELAYER_PRIVATE_KEY: must not be a public anvil\/Hardhat development key/);
      // The key itself is never echoed.
      expect(refusal('settlement', { ...PRODUCTION, RELAYER_PRIVATE_KEY: key })).not.toContain(key.slice(2));
    },
  );

  it('settlement refuses a guessable escrow key', () => {
    const weak = `0x${'0'.repeat(63)}1`;
    expect(
      refusal('settlement', {
        ...PRODUCTION,
        ESCROW_PRIVATE_KEY: weak,
        ESCROW_ADDRESS: new Wallet(weak).address,
      }),
    ).toContain('ESCROW_PRIVATE_KEY: must not be a guessable key in production');
  });

  const WEAK_SECRETS = [
    'changeme-changeme-changeme-changeme',
    'a'.repeat(48),
    'abcdefabcdefabcdefabcdefabcdefabcdef',
    '0101010101010101010101010101010101010101',
    'my-production-password-for-paygate-ops',
    'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab',
  ];
  it.each(WEAK_SECRETS)('every service refuses the guessable secret %s', (weak) => {
    const cases: Array<[string, string]> = [
      ['registry', 'SESSION_SECRET'],
      ['registry', 'SECRETS_ENCRYPTION_KEY'],
      ['registry', 'OPERATOR_TOKEN'],
      ['checkout', 'OPERATOR_TOKEN'],
      ['escrow-ledger', 'OPERATOR_TOKEN'],
      ['settlement', 'OPERATOR_TOKEN'],
      ['gateway-proxy', 'TICKET_KEY_ENCRYPTION_KEY'],
    ];
    for (const [service, variable] of cases) {
      expect({ service, variable, refusal: refusal(service, { ...PRODUCTION, [variable]: weak }) }).toEqual({
        service,
        variable,
        refusal: expect.stringContaining(
          `invalid production configuration of ${service}: ${variable}: must not be guessable in production`,
        ),
      });
    }
  });

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
