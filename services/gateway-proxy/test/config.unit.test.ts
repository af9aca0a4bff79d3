import { ConfigError } from '@paygate/runtime';
import { loadConfig } from '../src/config';

// The local chain needs its USDC address and the escrow wallet (anvil's first contract and account 1).
const base = {
  USDC_ADDRESS: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
  ESCROW_ADDRESS: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
};

describe('gateway-proxy config', () => {
  it('bounds X402_INCLUSION_WAIT_MS by its rule, named with the other bad variables in one error', () => {
    expect(loadConfig({ ...base, X402_INCLUSION_WAIT_MS: '60000' }).x402InclusionWaitMs).toBe(60_000);
    expect(() => loadConfig({ ...base, X402_INCLUSION_WAIT_MS: '60001' })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, X402_INCLUSION_WAIT_MS: '60001', X402_MIN_AMOUNT: '0' })).toThrow(
      /X402_INCLUSION_WAIT_MS: must be an integer from 1 to 60000.*X402_MIN_AMOUNT: must be more than 0 USDC/,
    );
    expect(() =>
      loadConfig({ ...base, RATE_LIMIT_PER_MINUTE: '0', TICKET_SIGNING_KEY: 'not a key' }),
    ).toThrow(
      /RATE_LIMIT_PER_MINUTE: must be an integer of at least 1.*TICKET_SIGNING_KEY: must be a PEM EC private key/,
    );
    expect(loadConfig(base)).toMatchObject({ x402MinAmountMicro: 10_000n, ticketSigningKeyPem: undefined });
  });
});
