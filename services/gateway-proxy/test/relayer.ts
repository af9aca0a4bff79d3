import {
  loadConfig as loadSettlementConfig,
  type RunningSettlement,
  startSettlement,
} from '@paygate/settlement';
import { testWallets, waitFor } from '@paygate/testing';
import { ExactEvmScheme } from '@x402/evm';
import type { Harness } from './harness';

/** The harness chain as x402 names it (anvil's chain id). */
export const LOCAL_NETWORK = 'eip155:31337' as const;

/**
 * settlement's relayer on the harness's chain (its payout scheduler idle, transfers polled every 200 ms), so x402
 * payments settle; answered once the gateway offers x402 (the token's EIP-712 domain read, the relayer's gas seen).
 * `env` overrides settlement's variables (another network name, say).
 */
export async function startRelayer(h: Harness, env: Record<string, string> = {}): Promise<RunningSettlement> {
  const settlement = await startSettlement(
    loadSettlementConfig(
      h.env.envFor('settlement', {
        CHAIN_RPC_URL: h.anvil.rpcUrl,
        CHAIN_NETWORK: 'local',
        USDC_ADDRESS: h.usdcAddress,
        ESCROW_PRIVATE_KEY: testWallets.escrow.privateKey,
        RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey,
        CONFIRMATIONS: '1',
        SCHEDULER_INTERVAL_MS: '3600000',
        TRANSFER_POLL_INTERVAL_MS: '200',
        ...env,
      }),
    ),
  );
  await waitFor(() => h.gateway.state.x402.offered(), { timeoutMs: 15_000, message: 'x402 never offered' });
  return settlement;
}

/**
 * An unmodified x402 client's configuration paying on the harness's chain as `account`: the test USDC is not one
 * of x402's default assets, so it is allowed explicitly (what an agent on anvil sets), up to 1 USDC a payment.
 */
export function x402ClientConfig(h: Harness, account: ConstructorParameters<typeof ExactEvmScheme>[0]) {
  return {
    schemes: [{ network: LOCAL_NETWORK, client: new ExactEvmScheme(account) }],
    spendControls: {
      allowedAssets: [{ network: LOCAL_NETWORK, asset: h.usdcAddress, maxAmountPerPayment: '1000000' }],
    },
  };
}

/** A wallet's balance of the harness's USDC (micro-USDC), read at the latest block. */
export function usdcBalanceOf(h: Harness, address: string): Promise<bigint> {
  return h.anvil.provider
    .call({ to: h.usdcAddress, data: `0x70a08231${address.slice(2).toLowerCase().padStart(64, '0')}` })
    .then(BigInt);
}
