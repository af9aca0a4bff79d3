/**
 * Mints test USDC on the local chain of `make dev`: `pnpm exec tsx deploy/dev/mint.ts <address> <amount in USDC>`.
 * Signs as the test USDC's owner, anvil's deployer account (a public dev key: the local chain only).
 * CHAIN_RPC_URL and USDC_ADDRESS default to what `make dev` prints (the first contract the deployer deploys).
 */
import { makeProvider, usdcAbi } from '@paygate/chain';
import { testWallets } from '@paygate/testing';
import { Contract, getAddress, parseUnits, Wallet } from 'ethers';

export const LOCAL_USDC_ADDRESS = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const USAGE = 'usage: pnpm exec tsx deploy/dev/mint.ts <address> <amount in USDC, e.g. 100 or 2.5>';

async function main(): Promise<void> {
  const [to, amount] = process.argv.slice(2);
  if (!to || !amount) throw new Error(USAGE);
  let recipient: string;
  try {
    recipient = getAddress(to);
  } catch {
    throw new Error(`address: must be a 20-byte hex address (${USAGE})`);
  }
  if (!/^\d{1,12}(\.\d{1,6})?$/.test(amount) || parseUnits(amount, 6) === 0n)
    throw new Error(`amount: must be a positive USDC amount with at most 6 decimals (${USAGE})`);
  const amountMicro = parseUnits(amount, 6);
  const rpcUrl = process.env.CHAIN_RPC_URL ?? 'http://127.0.0.1:8545';
  const provider = makeProvider(rpcUrl, { timeoutMs: 10_000, pollingIntervalMs: 100 });
  try {
    const usdc = new Contract(
      process.env.USDC_ADDRESS ?? LOCAL_USDC_ADDRESS,
      usdcAbi,
      new Wallet(testWallets.deployer.privateKey, provider),
    );
    const tx = await usdc.getFunction('mint')(recipient, amountMicro);
    await tx.wait(1, 30_000);
    const balance = (await usdc.getFunction('balanceOf')(recipient)) as bigint;
    console.log(`minted ${amount} USDC to ${recipient} in ${tx.hash}; balance now ${balance} micro-USDC`);
  } finally {
    provider.destroy();
  }
}

main().catch((error) => {
  console.error((error as Error).message);
  process.exit(1);
});
