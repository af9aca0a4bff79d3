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
  /** Milliseconds by phase: `challenge` (the first 402), `client` (x402/fetch's own 402 and signing), `paid` (the paid
   * request), and the gateway's Server-Timing phases of the paid request. */
  phasesMs?: Record<string, number>;
}

/** `verify;dur=1.2, include;dur=800` as `{ verify: 1.2, include: 800 }`. */
export function serverTimingPhases(header: string | null): Record<string, number> {
  const phases: Record<string, number> = {};
  for (const part of (header ?? '').split(',')) {
    const match = /^\s*([\w-]+);dur=([\d.]+)/.exec(part);
    if (match) phases[match[1]!] = Number(match[2]);
  }
  return phases;
}

export async function payWithX402(url: string, buyer: Wallet): Promise<X402Outcome> {
  const startedAt = performance.now();
  const challenge = await fetch(url, { signal: AbortSignal.timeout(15_000) });
  const challengeMs = performance.now() - startedAt;
  const required = challenge.headers.get('payment-required');
  if (challenge.status !== 402 || !required) return { status: challenge.status, code: 'no x402 challenge' };
  const accepts = JSON.parse(Buffer.from(required, 'base64').toString('utf8')).accepts[0];
  let lastRequestStartedAt = 0;
  const timedFetch: typeof fetch = (input, init) => {
    lastRequestStartedAt = performance.now();
    return fetch(input, init);
  };
  const pay = wrapFetchWithPaymentFromConfig(timedFetch, {
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
  const payStartedAt = performance.now();
  const response = await pay(url, { signal: AbortSignal.timeout(40_000) });
  const answeredAt = performance.now();
  const phasesMs = {
    challenge: challengeMs,
    client: lastRequestStartedAt - payStartedAt,
    paid: answeredAt - lastRequestStartedAt,
    ...serverTimingPhases(response.headers.get('server-timing')),
  };
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
    phasesMs,
  };
}
