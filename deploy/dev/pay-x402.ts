/**
 * Pays for one call with the standard x402 client, gasless: `pnpm exec tsx deploy/dev/pay-x402.ts <paid skill URL>`.
 * The buyer test wallet signs an EIP-3009 authorization; Paygate's relayer submits it (anvil's public dev key:
 * never use it elsewhere). The local test USDC is not one of x402's default assets, so it is allowed explicitly
 * (spendControls.allowedAssets), with a cap of 0.10 USDC per payment.
 */

import { formatUsdc } from '@paygate/money';
import { testWallets } from '@paygate/testing';
import { ExactEvmScheme } from '@x402/evm';
import { decodePaymentResponseHeader, wrapFetchWithPaymentFromConfig } from '@x402/fetch';
import { privateKeyToAccount } from 'viem/accounts';

async function main(): Promise<void> {
  const url = process.argv[2];
  if (!url) throw new Error('usage: tsx deploy/dev/pay-x402.ts <paid skill URL>');
  // The challenge names the network and asset to allow.
  const challenge = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  const required = challenge.headers.get('payment-required');
  if (challenge.status !== 402 || !required) {
    throw new Error(
      `expected a 402 with PAYMENT-REQUIRED, got ${challenge.status} (is the relayer running?)`,
    );
  }
  const accepts = JSON.parse(Buffer.from(required, 'base64').toString('utf8')).accepts[0];
  const pay = wrapFetchWithPaymentFromConfig(fetch, {
    schemes: [
      {
        network: accepts.network,
        client: new ExactEvmScheme(privateKeyToAccount(testWallets.buyer.privateKey as `0x${string}`)),
      },
    ],
    spendControls: {
      allowedAssets: [{ network: accepts.network, asset: accepts.asset, maxAmountPerPayment: '100000' }],
    },
  });
  const response = await pay(url, { signal: AbortSignal.timeout(30_000) });
  console.log(`HTTP ${response.status}`);
  console.log(await response.text());
  const settled = response.headers.get('payment-response');
  if (settled) {
    const receipt = decodePaymentResponseHeader(settled);
    console.log(
      `paid ${formatUsdc(BigInt(accepts.amount))} USDC in ${receipt.transaction} (payer ${receipt.payer}, no gas)`,
    );
  }
}

main().catch((error) => {
  console.error((error as Error).message);
  process.exit(1);
});
