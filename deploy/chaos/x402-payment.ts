/**
 * The load's x402 operation: the standard x402 client (`@x402/fetch`) pays a paid call gasless with an EIP-3009
 * authorization the buyer signs; Paygate's relayer (settlement) submits it. The local test USDC is not one of
 * x402's default assets, so it is allowed explicitly, capped at 0.10 USDC per payment.
 */
import { ExactEvmScheme } from '@x402/evm';
import { decodePaymentResponseHeader, wrapFetchWithPaymentFromConfig } from '@x402/fetch';
import type { Wallet } from 'ethers';
import { privateKeyToAccount } from 'viem/accounts';

export interface X402Outcome {
  status: number;
  /** The relayer's transaction, from the PAYMENT-RESPONSE header of a served call. */
  txHash?: string;
  code?: string;
}

export async function payWithX402(url: string, buyer: Wallet): Promise<X402Outcome> {
  const challenge = await fetch(url, { signal: AbortSignal.timeout(15_000) });
  const required = challenge.headers.get('payment-required');
  if (challenge.status !== 402 || !required) return { status: challenge.status, code: 'no x402 challenge' };
  const accepts = JSON.parse(Buffer.from(required, 'base64').toString('utf8')).accepts[0];
  const pay = wrapFetchWithPaymentFromConfig(fetch, {
    schemes: [
      {
        network: accepts.network,
        client: new ExactEvmScheme(privateKeyToAccount(buyer.privateKey as `0x${string}`)),
      },
    ],
    spendControls: {
      allowedAssets: [{ network: accepts.network, asset: accepts.asset, maxAmountPerPayment: '100000' }],
    },
  });
  const response = await pay(url, { signal: AbortSignal.timeout(40_000) });
  const settled = response.headers.get('payment-response');
  const body = (await response.json().catch(() => null)) as {
    error?: string | { code?: string };
    reason?: string;
  } | null;
  const code = body?.reason ?? (typeof body?.error === 'string' ? body.error : body?.error?.code) ?? '';
  return {
    status: response.status,
    ...(settled ? { txHash: decodePaymentResponseHeader(settled).transaction } : {}),
    ...(response.status !== 200 ? { code } : {}),
  };
}
