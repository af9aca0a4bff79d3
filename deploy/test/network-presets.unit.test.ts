/**
 * Paygate's Base presets (libs/chain) against what others publish for the same tokens: the x402 reference
 * implementation's default assets (@x402/evm, maintained by Coinbase) and, when an RPC URL is given
 * (BASE_RPC_URL, BASE_SEPOLIA_RPC_URL), the USDC contracts themselves.
 */
import { networkByName, usdcAbi } from '@paygate/chain';
import { DEFAULT_ASSETS } from '@x402/evm';
import { Contract, JsonRpcProvider } from 'ethers';

const BASE_NETWORKS = ['base', 'base-sepolia'] as const;

describe('Base network presets', () => {
  it.each(BASE_NETWORKS)(
    "%s matches @x402/evm's default USDC (address, EIP-712 name and version)",
    (name) => {
      const preset = networkByName(name);
      const [published] = (DEFAULT_ASSETS as Record<string, ReadonlyArray<object>>)[preset.caip2] ?? [];
      expect(published).toMatchObject({
        asset: preset.usdcAddress,
        name: preset.usdcEip712Name,
        version: preset.usdcEip712Version,
        decimals: 6,
      });
    },
  );

  const live = BASE_NETWORKS.map((name) => ({
    name,
    rpcUrl: process.env[name === 'base' ? 'BASE_RPC_URL' : 'BASE_SEPOLIA_RPC_URL'],
  }));
  for (const { name, rpcUrl } of live) {
    (rpcUrl ? it : it.skip)(
      `${name} matches the USDC contract on chain (needs its RPC URL)`,
      async () => {
        const preset = networkByName(name);
        const provider = new JsonRpcProvider(rpcUrl, preset.chainId, { staticNetwork: true });
        try {
          const usdc = new Contract(preset.usdcAddress!, usdcAbi, provider);
          expect(Number((await provider.getNetwork()).chainId)).toBe(preset.chainId);
          expect(await usdc.getFunction('name')()).toBe(preset.usdcEip712Name);
          expect(await usdc.getFunction('version')()).toBe(preset.usdcEip712Version);
          expect(Number(await usdc.getFunction('decimals')())).toBe(6);
        } finally {
          provider.destroy();
        }
      },
      30_000,
    );
  }
});
