import { ConfigError } from '@paygate/runtime';
import { testWallets } from '@paygate/testing';
import { HDNodeWallet, Mnemonic, Wallet } from 'ethers';
import { loadConfig } from '../src/config';
import { periodAt, settlementIdFor } from '../src/schedule/periods';

const base = {
  ESCROW_PRIVATE_KEY: testWallets.escrow.privateKey,
  USDC_ADDRESS: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
};

// Production refuses the public anvil keys (base's escrow key is one) and mnemonic: fresh keys.
const depositNode = HDNodeWallet.createRandom(undefined, "m/44'/60'/1'/0");
const production = {
  NODE_ENV: 'production',
  OPERATOR_TOKEN: 'a-production-operator-token',
  ESCROW_PRIVATE_KEY: Wallet.createRandom().privateKey,
  MAX_TRANSFER_USDC: '5000',
  RELAYER_PRIVATE_KEY: Wallet.createRandom().privateKey,
  CHECKOUT_DEPOSIT_XPRV: depositNode.extendedKey,
};

describe('settlement config', () => {
  it('has short development periods and an operator token, and refuses both shortcuts in production', () => {
    expect(loadConfig({ ...base, SETTLEMENT_PERIOD_SECONDS: '120' })).toMatchObject({
      settlementPeriodSeconds: 120,
      operatorToken: 'dev-operator-token',
    });
    expect(loadConfig(base).settlementPeriodSeconds).toBe(0);
    expect(() => loadConfig({ ...base, ...production, SETTLEMENT_PERIOD_SECONDS: '120' })).toThrow(
      /SETTLEMENT_PERIOD_SECONDS: development only/,
    );
    expect(() => loadConfig({ ...base, SETTLEMENT_PERIOD_SECONDS: '-1' })).toThrow(
      /SETTLEMENT_PERIOD_SECONDS/,
    );
    expect(() => loadConfig({ ...base, NODE_ENV: 'production' })).toThrow(/OPERATOR_TOKEN/);
    expect(() => loadConfig({ ...base, OPERATOR_TOKEN: 'short' })).toThrow(/OPERATOR_TOKEN/);
    expect(loadConfig({ ...base, ...production }).operatorToken).toBe(production.OPERATOR_TOKEN);
  });

  it('caps every transfer out of escrow: MAX_TRANSFER_USDC, required in production; TREASURY_ADDRESS checked', () => {
    expect(loadConfig(base)).toMatchObject({ maxTransferUsdc: '100000', treasuryAddress: null });
    expect(() => loadConfig({ ...base, ...production, MAX_TRANSFER_USDC: undefined })).toThrow(
      /MAX_TRANSFER_USDC: must be set in production/,
    );
    expect(() => loadConfig({ ...base, MAX_TRANSFER_USDC: '0' })).toThrow(
      /MAX_TRANSFER_USDC: must be greater/,
    );
    expect(() => loadConfig({ ...base, MAX_TRANSFER_USDC: 'lots' })).toThrow(
      /MAX_TRANSFER_USDC: must be a decimal/,
    );
    expect(loadConfig({ ...base, ...production }).maxTransferUsdc).toBe('5000');
    expect(
      loadConfig({ ...base, TREASURY_ADDRESS: testWallets.platform.address.toLowerCase() }).treasuryAddress,
    ).toBe(testWallets.platform.address);
    expect(() => loadConfig({ ...base, TREASURY_ADDRESS: '0x12' })).toThrow(/TREASURY_ADDRESS/);
    expect(() => loadConfig({ ...base, TREASURY_ADDRESS: `0x${'0'.repeat(40)}` })).toThrow(
      /TREASURY_ADDRESS/,
    );
  });

  it('requires the escrow key and never shows it', () => {
    expect(() => loadConfig({})).toThrow(ConfigError);
    let message = '';
    try {
      loadConfig({ ...base, ESCROW_PRIVATE_KEY: '0xnot-a-key-secret' });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/ESCROW_PRIVATE_KEY/);
    expect(message).not.toContain('not-a-key-secret');
    // 32 bytes, but no key (zero is outside the curve's range).
    expect(() => loadConfig({ ...base, ESCROW_PRIVATE_KEY: `0x${'0'.repeat(64)}` })).toThrow(
      /ESCROW_PRIVATE_KEY/,
    );
    const config = loadConfig(base);
    expect(config.escrowAddress).toBe(testWallets.escrow.address);
    expect(config.escrowPrivateKey).toBe(testWallets.escrow.privateKey);
    expect(JSON.stringify(config)).not.toContain(testWallets.escrow.privateKey.slice(2));
    expect(Object.keys(config)).not.toContain('escrowPrivateKey');
  });

  it('refuses a relayer key equal to the escrow key, in any hex case, without showing it', () => {
    const refusal = (relayerKey: string) => {
      try {
        loadConfig({ ...base, RELAYER_PRIVATE_KEY: relayerKey });
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
      }
      return null;
    };
    const escrowKey = testWallets.escrow.privateKey;
    for (const sameKey of [escrowKey, `0x${escrowKey.slice(2).toUpperCase()}`]) {
      const message = refusal(sameKey);
      expect(message).toMatch(/RELAYER_PRIVATE_KEY: must not be the escrow key/);
      expect(message).not.toContain(escrowKey.slice(2, 18));
      expect(message).not.toContain(escrowKey.slice(2, 18).toUpperCase());
    }
    // A gas-only key of its own is accepted; no key means no relayer.
    expect(refusal(testWallets.relayer.privateKey)).toBeNull();
    expect(
      loadConfig({ ...base, RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey }).relayer,
    ).toMatchObject({
      address: testWallets.relayer.address,
    });
    expect(loadConfig(base).relayer).toBeNull();
  });

  it('reads a pool of relayer keys (RELAYER_PRIVATE_KEYS), never shown, and names a bad, repeated or escrow key by its place', () => {
    const keys = [Wallet.createRandom(), Wallet.createRandom(), Wallet.createRandom()];
    const relayer = loadConfig({ ...base, RELAYER_PRIVATE_KEYS: keys.map((k) => k.privateKey).join(' , ') })
      .relayer!;
    expect(relayer.addresses).toEqual(keys.map((k) => k.address));
    expect(relayer.address).toBe(keys[0]!.address);
    expect(relayer.privateKeys).toEqual(keys.map((k) => k.privateKey));
    expect(Object.keys(relayer)).not.toContain('privateKeys');
    expect(JSON.stringify(relayer, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(
      keys[1]!.privateKey.slice(2, 18),
    );
    // The single key still works, as a pool of one; the same key as the pool's first beside it is accepted.
    expect(loadConfig({ ...base, RELAYER_PRIVATE_KEY: keys[0]!.privateKey }).relayer!.addresses).toEqual([
      keys[0]!.address,
    ]);
    expect(
      loadConfig({
        ...base,
        RELAYER_PRIVATE_KEY: keys[0]!.privateKey,
        RELAYER_PRIVATE_KEYS: `${keys[0]!.privateKey},${keys[1]!.privateKey}`,
      }).relayer!.addresses,
    ).toHaveLength(2);
    const message = (env: Record<string, string>) => {
      try {
        loadConfig({ ...base, ...env });
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
      }
      return null;
    };
    const pool = (...list: string[]) => ({ RELAYER_PRIVATE_KEYS: list.join(',') });
    expect(message(pool(keys[0]!.privateKey, '0x12'))).toMatch(
      /RELAYER_PRIVATE_KEYS \(key 2\): must be a 0x-prefixed 32-byte hex key/,
    );
    expect(message(pool(keys[0]!.privateKey, keys[0]!.privateKey))).toMatch(
      /RELAYER_PRIVATE_KEYS \(key 2\): the same key twice/,
    );
    const escrowMessage = message(pool(keys[0]!.privateKey, testWallets.escrow.privateKey));
    expect(escrowMessage).toMatch(/RELAYER_PRIVATE_KEYS \(key 2\): must not be the escrow key/);
    expect(escrowMessage).not.toContain(testWallets.escrow.privateKey.slice(2, 18));
    expect(message({ ...pool(keys[0]!.privateKey), RELAYER_PRIVATE_KEY: keys[1]!.privateKey })).toMatch(
      /RELAYER_PRIVATE_KEY: set RELAYER_PRIVATE_KEYS alone, or make this its first key/,
    );
    // Production refuses a public development key anywhere in the pool.
    expect(
      message({
        ...production,
        RELAYER_PRIVATE_KEYS: `${keys[0]!.privateKey},${testWallets.relayer.privateKey}`,
        RELAYER_PRIVATE_KEY: '',
      }),
    ).toMatch(/RELAYER_PRIVATE_KEYS \(key 2\): must not be a public anvil\/Hardhat development key/);
  });

  it('names a bad relayer or sweep setting with the key problems in one error, and only when the key is set', () => {
    const message = (env: Record<string, string>) => {
      try {
        loadConfig({ ...base, ...env });
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
      }
      return null;
    };
    expect(message({ RELAYER_PRIVATE_KEY: '0x12', RELAYER_MAX_FEE_BUMPS: '-1' })).toBe(
      'invalid configuration: RELAYER_MAX_FEE_BUMPS: must be an integer of at least 0; RELAYER_PRIVATE_KEY: must be a 0x-prefixed 32-byte hex key',
    );
    // Without a relayer key there is no relayer, and its settings are not read.
    expect(message({ RELAYER_MAX_FEE_BUMPS: '-1' })).toBeNull();
    const checkoutKey = Wallet.createRandom();
    expect(
      message({
        CHECKOUT_ESCROW_PRIVATE_KEY: checkoutKey.privateKey,
        CHECKOUT_ESCROW_ADDRESS: '0x1234',
        CHECKOUT_SWEEP_INTERVAL_MS: '10',
      }),
    ).toBe(
      'invalid configuration: CHECKOUT_ESCROW_ADDRESS: must be a 20-byte hex address; CHECKOUT_SWEEP_INTERVAL_MS: must be an integer of at least 100',
    );
    expect(
      message({
        CHECKOUT_ESCROW_PRIVATE_KEY: checkoutKey.privateKey,
        CHECKOUT_ESCROW_ADDRESS: checkoutKey.address,
      }),
    ).toBeNull();
    // In production a checkout deposit wallet without its key is refused, even when its address is malformed.
    expect(() =>
      loadConfig({
        ...base,
        ...production,
        CHECKOUT_ESCROW_ADDRESS: '0x1234',
        CHECKOUT_ESCROW_PRIVATE_KEY: '',
      }),
    ).toThrow(/CHECKOUT_ESCROW_PRIVATE_KEY: must be set in production when CHECKOUT_ESCROW_ADDRESS is/);
  });

  it('knows the USDC address of base, and needs one for local', () => {
    expect(
      loadConfig({ ESCROW_PRIVATE_KEY: base.ESCROW_PRIVATE_KEY, CHAIN_NETWORK: 'base' }).usdcAddress,
    ).toBe('0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913');
    expect(() => loadConfig({ ESCROW_PRIVATE_KEY: base.ESCROW_PRIVATE_KEY })).toThrow(/USDC_ADDRESS/);
    expect(() => loadConfig({ ...base, CONFIRMATIONS: '0' })).toThrow(/CONFIRMATIONS/);
  });

  it('honours the crash hook only outside production', () => {
    expect(loadConfig({ ...base, SETTLEMENT_CRASH_POINT: 'after_record' }).crashPoint).toBe('after_record');
    expect(
      loadConfig({ ...base, ...production, SETTLEMENT_CRASH_POINT: 'after_record' }).crashPoint,
    ).toBeNull();
    expect(() => loadConfig({ ...base, SETTLEMENT_CRASH_POINT: 'somewhere' })).toThrow(
      /SETTLEMENT_CRASH_POINT/,
    );
  });
});

describe('settlement periods (UTC)', () => {
  it('cuts days, Monday weeks and calendar months', () => {
    const sunday = new Date('2026-11-29T23:59:59Z');
    expect(periodAt('DAILY', sunday)).toMatchObject({ key: 'D:2026-11-29' });
    expect(periodAt('WEEKLY', sunday)).toMatchObject({
      key: 'W:2026-11-23',
      start: new Date('2026-11-23T00:00:00Z'),
      end: new Date('2026-11-30T00:00:00Z'),
    });
    expect(periodAt('WEEKLY', new Date('2026-11-30T00:00:00Z')).key).toBe('W:2026-11-30');
    expect(periodAt('MONTHLY', new Date('2026-12-31T12:00:00Z'))).toMatchObject({
      key: 'M:2026-12',
      end: new Date('2027-01-01T00:00:00Z'),
    });
  });

  it('cuts fixed windows of SETTLEMENT_PERIOD_SECONDS that sort after the same day', () => {
    const at = new Date('2026-11-23T10:05:30Z');
    expect(periodAt('DAILY', at, 120)).toEqual({
      frequency: 'DAILY',
      key: 'D:2026-11-23T10:04:00.000Z',
      start: new Date('2026-11-23T10:04:00Z'),
      end: new Date('2026-11-23T10:06:00Z'),
    });
    expect(
      periodAt('DAILY', new Date('2026-11-23T10:06:00Z'), 120).key > periodAt('DAILY', at, 120).key,
    ).toBe(true);
    // Switching to short periods opens one at once; switching back waits for the next day.
    expect(periodAt('DAILY', at, 120).key > periodAt('DAILY', at).key).toBe(true);
    expect(periodAt('DAILY', new Date('2026-11-24T00:00:00Z')).key > periodAt('DAILY', at, 120).key).toBe(
      true,
    );
  });

  it('derives one settlement id per seller and period', () => {
    const period = periodAt('DAILY', new Date('2026-11-23T08:00:00Z'));
    const id = settlementIdFor('sel_a', period);
    expect(id).toMatch(/^stl_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(settlementIdFor('sel_a', periodAt('DAILY', new Date('2026-11-23T23:00:00Z')))).toBe(id);
    expect(settlementIdFor('sel_b', period)).not.toBe(id);
    expect(settlementIdFor('sel_a', periodAt('DAILY', new Date('2026-11-24T00:00:00Z')))).not.toBe(id);
    // Ids sort by period start, so listing by id lists newest periods first.
    expect(settlementIdFor('sel_a', periodAt('DAILY', new Date('2026-11-24T00:00:00Z'))) > id).toBe(true);
  });

  it('derives the deposit addresses from a mnemonic or an xprv, never shows the key, and refuses the public mnemonic in production', () => {
    // Outside production: the public test mnemonic at m/44'/60'/1'/0 (make dev, tests), as checkout's dev xpub.
    const dev = loadConfig(base).depositSweep;
    const publicNode = HDNodeWallet.fromMnemonic(
      Mnemonic.fromPhrase('test test test test test test test test test test test junk'),
      "m/44'/60'/1'/0",
    );
    expect(dev.xpub).toBe(publicNode.neuter().extendedKey);
    expect(dev.node.deriveChild(3).address).toBe(publicNode.deriveChild(3).address);
    expect(dev.minAmountMicro).toBe(10_000n);
    const config = loadConfig({ ...base, ...production });
    expect(config.depositSweep.xpub).toBe(depositNode.neuter().extendedKey);
    const shown = JSON.stringify(config, (_key, value) =>
      typeof value === 'bigint' ? String(value) : value,
    );
    expect(shown).toContain(depositNode.neuter().extendedKey);
    expect(shown).not.toContain(depositNode.extendedKey);
    expect(Object.keys(config.depositSweep)).not.toContain('node');
    expect(() =>
      loadConfig({ ...base, ...production, CHECKOUT_DEPOSIT_XPRV: publicNode.extendedKey }),
    ).toThrow(/is the public test mnemonic/);
    expect(() =>
      loadConfig({ ...base, ...production, CHECKOUT_DEPOSIT_XPRV: depositNode.neuter().extendedKey }),
    ).toThrow(/CHECKOUT_DEPOSIT_XPRV: must be an extended private key/);
    expect(() =>
      loadConfig({
        ...base,
        CHECKOUT_DEPOSIT_XPRV: depositNode.extendedKey,
        CHECKOUT_DEPOSIT_MNEMONIC: 'test test test test test test test test test test test junk',
      }),
    ).toThrow(/set one, not both/);
  });
});
