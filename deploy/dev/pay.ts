/**
 * Pays for one call as an agent would: `pnpm exec tsx deploy/dev/pay.ts <paid skill URL>`.
 * Uses the buyer test wallet on the local chain of `make dev` (anvil's public dev key: never use it elsewhere).
 */
import { createAgent } from '@paygate/agent-client';
import { testWallets } from '@paygate/testing';
import { JsonRpcProvider, Wallet } from 'ethers';

async function main(): Promise<void> {
  const url = process.argv[2];
  if (!url) throw new Error('usage: tsx deploy/dev/pay.ts <paid skill URL>');
  const provider = new JsonRpcProvider(process.env.CHAIN_RPC_URL ?? 'http://127.0.0.1:8545', 31337, {
    staticNetwork: true,
  });
  const agent = createAgent({
    wallet: new Wallet(testWallets.buyer.privateKey, provider),
    maxPricePerCall: '0.10',
    maxTotalSpend: '1.00',
  });
  const response = await agent.fetch(url);
  console.log(`HTTP ${response.status}`);
  console.log(await response.text());
  for (const payment of agent.payments) console.log(`paid ${payment.amount} USDC in ${payment.txHash}`);
  provider.destroy();
}

main().catch((error) => {
  console.error((error as Error).message);
  process.exit(1);
});
