import { createActiveSkill, signUpSeller } from '@paygate/testing';
import { startDemoSeller } from '../demo';
import type { LocalChain } from '../scripts/start-local-chain';
import { startDemoApi } from './demo-api';
import { DEMO } from './summary';

export interface DemoBootstrap {
  /** Paths the edge sends to the demo seller instead of a Paygate service. */
  edgePrefixes: Record<string, string>;
  seller: { address: string; sellerId: string; apiKey: string };
  /** The demo shop page with the checkout widget. */
  pageUrl: string;
  stop(): Promise<void>;
}

/**
 * Signs up the demo seller (the seller test wallet, over SIWE), registers a paid API skill and a product,
 * points the seller's webhooks at the demo page's receiver, and starts the demo page with the widget.
 */
export async function bootstrapDemo(options: {
  publicBaseUrl: string;
  /** The registry service itself (sign-up and skills go straight to it, not through the edge). */
  registryUrl: string;
  apiPort: number;
  pagePort: number;
  chain: LocalChain;
  operatorToken: string;
  log: (line: string) => void;
}): Promise<DemoBootstrap> {
  const seller = await signUpSeller(options.registryUrl, options.chain.wallets.seller.privateKey);
  // The demo API checks Paygate's signature with the key derived from the seller's secret key.
  const api = await startDemoApi(options.apiPort, seller.apiKey, options.publicBaseUrl);
  const skills = [
    {
      name: DEMO.apiSkill,
      displayName: 'Demo weather',
      description: 'A paid weather forecast for agents: one cent per call.',
      type: 'API' as const,
      mode: 'PROXY' as const,
      categories: ['weather', 'demo'],
      // Development: no hold, so a paid call is available at once and settles in the next 2-minute period.
      holdPeriodHours: 0,
      apiBaseUrl: api.url,
      endpoints: [
        { path: '/forecast', method: 'GET' as const, priceUsdc: '0.01', description: 'Forecast for ?city=' },
      ],
    },
    {
      name: DEMO.productSkill,
      displayName: 'Demo shop',
      description: 'A demo product paid with the checkout widget.',
      type: 'Product' as const,
      mode: 'PROXY' as const,
      categories: ['demo'],
      requiresShipping: false,
      holdPeriodHours: 0,
      apiBaseUrl: api.url,
      endpoints: [
        { path: '/orders', method: 'POST' as const, priceUsdc: '2.5', description: 'One demo item' },
      ],
    },
  ];
  // Every run starts on fresh schemas, so the demo skills are always new.
  for (const skill of skills) await createActiveSkill(options.registryUrl, seller.apiKey, skill);
  const page = await startDemoSeller({
    port: options.pagePort,
    paygateBaseUrl: options.publicBaseUrl,
    publishableKey: seller.publishableKey,
    skill: DEMO.productSkill,
    title: 'Demo shop',
    devWallet: {
      rpcUrl: options.chain.rpcUrl,
      privateKey: options.chain.wallets.buyer.privateKey,
      chainId: options.chain.chainId,
    },
  });
  const account = await fetch(`${options.registryUrl}/api/v1/account`, {
    method: 'PATCH',
    // The webhook URL is the wallet's to set (its session, not the sk_ key).
    headers: { authorization: `Bearer ${seller.sessionToken}`, 'content-type': 'application/json' },
    // A minimum of a tenth of a cent (the default is 10 USDC) so one paid call (95% of one cent) is paid out.
    body: JSON.stringify({ webhookUrl: `${page.url}/webhooks/paygate`, minimumSettlement: '0.001' }),
    signal: AbortSignal.timeout(5000),
  });
  if (!account.ok)
    options.log(`could not set the demo webhook URL and minimum: ${account.status} ${await account.text()}`);
  return {
    edgePrefixes: {},
    seller: { address: seller.walletAddress, sellerId: seller.sellerId, apiKey: seller.apiKey },
    pageUrl: page.url,
    async stop() {
      await page.stop().catch(() => undefined);
      await api.stop().catch(() => undefined);
    },
  };
}
