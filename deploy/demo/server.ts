import type { Server } from 'node:http';
import { verifyWebhook, WebhookVerificationError } from '@paygate/gateway-middleware';
import { JsonRpcProvider, Wallet } from 'ethers';
import express from 'express';
import { renderDemoPage } from './page';

export interface DemoSellerOptions {
  port: number;
  host?: string;
  /** Paygate's public base URL as the browser reaches it (the edge in `make dev`). */
  paygateBaseUrl: string;
  publishableKey: string;
  /** The skill (slug) the pay button charges for, and which endpoint if it has several. */
  skill: string;
  endpointId?: string;
  title?: string;
  /** Where the widget script comes from; defaults to `${paygateBaseUrl}/static/paygate-checkout.js`. */
  scriptUrl?: string;
  /** The seller's webhook signing secret; webhooks with a bad signature are refused with 400. */
  webhookSecret?: string;
  /**
   * DEV ONLY: a test wallet exposed to the page as an EIP-1193 provider. Signing happens here with this key
   * (the public anvil buyer key); only for a local chain.
   */
  devWallet?: { rpcUrl: string; privateKey: string; chainId: number };
}

export interface ReceivedWebhook {
  eventId: string | undefined;
  type: string;
  sessionId: string | undefined;
  status: string | undefined;
  body: unknown;
  receivedAt: string;
}

export interface DemoSeller {
  url: string;
  server: Server;
  webhooks: ReceivedWebhook[];
  stop(): Promise<void>;
}

const DEV_WALLET_METHODS = new Set([
  'eth_requestAccounts',
  'eth_accounts',
  'eth_chainId',
  'wallet_switchEthereumChain',
  'eth_sendTransaction',
]);

/** A demo seller: a page with the Paygate checkout widget, and a webhook receiver. */
export async function startDemoSeller(options: DemoSellerOptions): Promise<DemoSeller> {
  const app = express();
  app.disable('x-powered-by');
  const webhooks: ReceivedWebhook[] = [];
  const seen = new Set<string>();
  const baseUrl = options.paygateBaseUrl.replace(/\/$/, '');
  const wallet = options.devWallet
    ? new Wallet(
        options.devWallet.privateKey,
        new JsonRpcProvider(options.devWallet.rpcUrl, options.devWallet.chainId, { staticNetwork: true }),
      )
    : undefined;

  app.get('/', (_req, res) => {
    res.type('html').send(
      renderDemoPage({
        title: options.title ?? 'Demo seller',
        paygateBaseUrl: baseUrl,
        scriptUrl: options.scriptUrl ?? `${baseUrl}/static/paygate-checkout.js`,
        publishableKey: options.publishableKey,
        skill: options.skill,
        endpointId: options.endpointId,
        devWalletAddress: wallet?.address,
      }),
    );
  });

  // The webhook receiver: verify the signature over the raw bytes, drop duplicates by event id.
  app.post('/webhooks/paygate', express.raw({ type: '*/*', limit: '256kb' }), (req, res) => {
    const raw = req.body instanceof Buffer ? req.body : Buffer.alloc(0);
    if (options.webhookSecret) {
      try {
        verifyWebhook({
          payload: raw,
          header: req.header('paygate-signature'),
          secret: options.webhookSecret,
        });
      } catch (error) {
        const reason = error instanceof WebhookVerificationError ? error.message : 'invalid signature';
        res.status(400).json({ error: reason });
        return;
      }
    }
    let body: any;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      res.status(400).json({ error: 'body is not JSON' });
      return;
    }
    const eventId = req.header('paygate-event-id') ?? body?.id;
    if (!eventId || !seen.has(eventId)) {
      if (eventId) seen.add(eventId);
      const data = body?.data ?? body;
      webhooks.push({
        eventId,
        type: req.header('paygate-event-type') ?? body?.event ?? body?.type ?? 'unknown',
        sessionId: data?.sessionId,
        status: data?.status,
        body,
        receivedAt: new Date().toISOString(),
      });
      if (webhooks.length > 200) webhooks.shift();
    }
    res.json({ received: true });
  });
  app.get('/webhooks', (_req, res) => {
    res.json(webhooks.map(({ body: _body, ...summary }) => summary));
  });

  if (wallet) {
    // DEV ONLY: answers the page's EIP-1193 requests with the anvil buyer wallet.
    app.post('/dev-wallet/rpc', express.json(), async (req, res) => {
      const { method, params } = (req.body ?? {}) as { method?: string; params?: any[] };
      if (!method || !DEV_WALLET_METHODS.has(method)) {
        res.json({ error: { code: 4200, message: `unsupported method ${String(method)}` } });
        return;
      }
      try {
        if (method === 'eth_requestAccounts' || method === 'eth_accounts') {
          res.json({ result: [wallet.address] });
        } else if (method === 'eth_chainId') {
          res.json({ result: `0x${options.devWallet!.chainId.toString(16)}` });
        } else if (method === 'wallet_switchEthereumChain') {
          res.json({ result: null });
        } else {
          const tx = params?.[0] ?? {};
          const sent = await wallet.sendTransaction({ to: tx.to, data: tx.data, value: tx.value ?? 0 });
          res.json({ result: sent.hash });
        }
      } catch (error) {
        res.json({ error: { code: -32000, message: (error as Error).message.slice(0, 300) } });
      }
    });
  }

  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(options.port, options.host ?? '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  return {
    url: `http://${options.host && options.host !== '0.0.0.0' ? options.host : '127.0.0.1'}:${port}`,
    server,
    webhooks,
    async stop() {
      server.closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      wallet?.provider?.destroy();
    },
  };
}
