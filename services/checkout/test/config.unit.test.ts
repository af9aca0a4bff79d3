import { ConfigError } from '@paygate/runtime';
import { loadConfig } from '../src/config';

// The local chain needs its USDC address (the first contract anvil's deployer creates).
const base = { USDC_ADDRESS: '0x5FbDB2315678afecb367f032d93F642f64180aa3' };

describe('checkout config', () => {
  it('names every bad variable in one error: a malformed deposit wallet address and a bad xpub', () => {
    expect(() =>
      loadConfig({ ...base, CHECKOUT_ESCROW_ADDRESS: '0x1234', CHECKOUT_DEPOSIT_XPUB: 'xpub-nonsense' }),
    ).toThrow(ConfigError);
    expect(() =>
      loadConfig({ ...base, CHECKOUT_ESCROW_ADDRESS: '0x1234', CHECKOUT_DEPOSIT_XPUB: 'xpub-nonsense' }),
    ).toThrow(/CHECKOUT_ESCROW_ADDRESS: must be a 20-byte hex address; CHECKOUT_DEPOSIT_XPUB: /);
  });

  it('uses the dev checkout wallet when none is set, a checksummed one when it is, and never the agent escrow', () => {
    expect(loadConfig(base).checkoutEscrowAddress).toBe('0x14dC79964da2C08b23698B3D3cc7Ca32193d9955');
    expect(loadConfig(base).checkoutEscrowAddress).not.toBe(loadConfig(base).escrowAddress);
    expect(() => loadConfig({ ...base, CHECKOUT_ESCROW_ADDRESS: loadConfig(base).escrowAddress })).toThrow(
      /CHECKOUT_ESCROW_ADDRESS: must differ from ESCROW_ADDRESS \(the agent escrow\)/,
    );
    expect(
      loadConfig({ ...base, CHECKOUT_ESCROW_ADDRESS: '0x14dc79964da2c08b23698b3d3cc7ca32193d9955' })
        .checkoutEscrowAddress,
    ).toBe('0x14dC79964da2C08b23698B3D3cc7Ca32193d9955');
  });

  it("holds a session without a skill for the Service type's default (docs/api.md's holdPeriodHours defaults), or DEFAULT_HOLD_PERIOD_HOURS", () => {
    expect(loadConfig(base).defaultHoldPeriodHours).toBe(48);
    expect(loadConfig({ ...base, DEFAULT_HOLD_PERIOD_HOURS: '0' }).defaultHoldPeriodHours).toBe(0);
    expect(() => loadConfig({ ...base, DEFAULT_HOLD_PERIOD_HOURS: '169' })).toThrow(
      /DEFAULT_HOLD_PERIOD_HOURS/,
    );
  });
});
