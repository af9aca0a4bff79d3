import { createActiveSkill, signUpSeller } from '@paygate/testing';
import { startDemoSeller } from '../demo';
import type { LocalChain } from '../scripts/start-local-chain';
import { startDemoApi } from './demo-api';

export interface DemoBootstrap {
  /** Paths the edge sends to the demo seller instead of a Paygate service. */
  edgePrefixes: Record<string, string>;
  nextSteps: string;
  stop(): Promise<void>;
}

const REGISTRY_URL = 'http://127.0.0.1:8081';
const DEMO_API_PORT = Number(process.env.DEMO_API_PORT ?? 8091);
const DEMO_PAGE_PORT = Number(process.env.DEMO_PAGE_PORT ?? 8090);

/**
 * Signs up the demo seller (the seller test wallet, over SIWE), registers a paid API skill and a product,
 * points the seller's webhooks at the demo page's receiver, and starts the demo page with the widget.
 */
export async function bootstrapDemo(options: {
  publicBaseUrl: string;
  chain: LocalChain;
  operatorToken: string;
  log: (line: string) => void;
}): Promise<DemoBootstrap> {
  const api = await startDemoApi(DEMO_API_PORT);
  const seller = await signUpSeller(REGISTRY_URL, options.chain.wallets.seller.privateKey);
  const skills = [
    {
      name: 'demo-weather',
      displayName: 'Demo weather',
      description: 'A paid weather forecast for agents: one cent per call.',
      type: 'API' as const,
      mode: 'PROXY' as const,
      categories: ['weather', 'demo'],
      apiBaseUrl: api.url,
      endpoints: [
        { path: '/forecast', method: 'GET' as const, priceUsdc: '0.01', description: 'Forecast for ?city=' },
      ],
    },
    {
      name: 'demo-shop',
      displayName: 'Demo shop',
      description: 'A demo product paid with the checkout widget.',
      type: 'Product' as const,
      mode: 'PROXY' as const,
      categories: ['demo'],
      requiresShipping: false,
      apiBaseUrl: api.url,
      endpoints: [
        { path: '/orders', method: 'POST' as const, priceUsdc: '2.5', description: 'One demo item' },
      ],
    },
  ];
  for (const skill of skills) {
    await createActiveSkill(REGISTRY_URL, seller.apiKey, skill).catch((error: Error) => {
      // A second `make dev` finds them registered already.
      if (!/already|exists|taken|409/i.test(error.message)) throw error;
    });
  }
  const page = await startDemoSeller({
    port: DEMO_PAGE_PORT,
    paygateBaseUrl: options.publicBaseUrl,
    publishableKey: seller.publishableKey,
    skill: 'demo-shop',
    title: 'Demo shop',
    devWallet: {
      rpcUrl: options.chain.rpcUrl,
      privateKey: options.chain.wallets.buyer.privateKey,
      chainId: options.chain.chainId,
    },
  });
  const account = await fetch(`${REGISTRY_URL}/api/v1/account`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${seller.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ webhookUrl: `${page.url}/webhooks/paygate` }),
    signal: AbortSignal.timeout(5000),
  });
  if (!account.ok)
    options.log(`could not set the demo webhook URL: ${account.status} ${await account.text()}`);
  const base = options.publicBaseUrl;
  return {
    edgePrefixes: {},
    nextSteps: `\x1b[1mDemo seller\x1b[0m ${seller.walletAddress} (${seller.sellerId})
  API key       ${seller.apiKey.slice(0, 12)}… (shown once; rotate it with POST /api/v1/account/api-key/rotate)
  shop page     ${page.url}/   (pay with the widget; "Pay from the dev test wallet" sends it on the local chain)
  received webhooks ${page.url}/webhooks

\x1b[1mNext steps\x1b[0m
  curl -i ${base}/api/v1/skills/demo-weather/forecast            # 402: what to pay
  pnpm exec tsx deploy/dev/pay.ts ${base}/api/v1/skills/demo-weather/forecast   # pay and call, as an agent
  curl ${base}/api/v1/skills/demo-weather/SKILL.md                # what agents read`,
    async stop() {
      await page.stop().catch(() => undefined);
      await api.stop().catch(() => undefined);
    },
  };
}
