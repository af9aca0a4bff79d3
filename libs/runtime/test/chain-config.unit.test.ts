import { networks } from '@paygate/chain';
import { ConfigError, chainConfig } from '../src';

const ESCROW = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';
const USDC = '0x5fbdb2315678afecb367f032d93f642f64180aa3';

describe('chainConfig', () => {
  it('parses the chain variables, checksums addresses and applies the defaults', () => {
    const config = chainConfig(
      { ESCROW_ADDRESS: ESCROW, USDC_ADDRESS: USDC },
      { confirmations: 2, rpcTimeoutMs: 5000 },
    );
    expect(config).toEqual({
      rpcUrl: 'http://127.0.0.1:8545',
      network: 'local',
      chainId: 31337,
      usdcAddress: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
      escrowAddress: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
      confirmations: 2,
      rpcTimeoutMs: 5000,
    });
  });

  it("uses the network preset's USDC and confirmations, and the variables when set", () => {
    const config = chainConfig(
      {
        CHAIN_NETWORK: 'base',
        ESCROW_ADDRESS: ESCROW,
        RPC_TIMEOUT_MS: '1500',
        CHAIN_RPC_URL: 'https://rpc.example',
      },
      { rpcTimeoutMs: 5000 },
    );
    expect(config).toMatchObject({
      network: 'base',
      chainId: 8453,
      usdcAddress: networks.base.usdcAddress,
      confirmations: 3,
      rpcTimeoutMs: 1500,
      rpcUrl: 'https://rpc.example',
    });
    expect(
      chainConfig(
        { ESCROW_ADDRESS: ESCROW, USDC_ADDRESS: USDC, CONFIRMATIONS: '7' },
        { confirmations: 2, rpcTimeoutMs: 1 },
      ).confirmations,
    ).toBe(7);
    for (const name of ['local', 'base', 'base-sepolia'] as const) {
      const env = { CHAIN_NETWORK: name, ESCROW_ADDRESS: ESCROW, USDC_ADDRESS: USDC };
      expect(chainConfig(env, { rpcTimeoutMs: 1 }).confirmations).toBe(networks[name].confirmations);
    }
  });

  it('fails loudly, naming every bad variable at once', () => {
    const attempt = () =>
      chainConfig(
        {
          CHAIN_NETWORK: 'mainnet',
          CHAIN_RPC_URL: 'not a url',
          USDC_ADDRESS: '0x123',
          ESCROW_ADDRESS: '',
          CONFIRMATIONS: '0',
          RPC_TIMEOUT_MS: '-5',
        },
        { confirmations: 2, rpcTimeoutMs: 5000 },
      );
    expect(attempt).toThrow(ConfigError);
    for (const name of [
      'CHAIN_NETWORK',
      'CHAIN_RPC_URL',
      'USDC_ADDRESS',
      'ESCROW_ADDRESS',
      'CONFIRMATIONS',
      'RPC_TIMEOUT_MS',
    ]) {
      expect(attempt).toThrow(new RegExp(`${name}:`));
    }
  });

  it('requires USDC_ADDRESS on local and ESCROW_ADDRESS unless a default is given', () => {
    expect(() => chainConfig({ ESCROW_ADDRESS: ESCROW }, { confirmations: 1, rpcTimeoutMs: 1 })).toThrow(
      /USDC_ADDRESS: .*required for CHAIN_NETWORK=local/,
    );
    expect(() => chainConfig({ USDC_ADDRESS: USDC }, { confirmations: 1, rpcTimeoutMs: 1 })).toThrow(
      /ESCROW_ADDRESS/,
    );
    expect(
      chainConfig({ USDC_ADDRESS: USDC }, { confirmations: 1, rpcTimeoutMs: 1, escrowAddress: ESCROW })
        .escrowAddress,
    ).toBe('0x70997970C51812dc3A010C7d01b50e0d17dc79C8');
  });
});
