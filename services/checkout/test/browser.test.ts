/**
 * The widget in headless Chromium against real services: checkout, notifier (WebSocket), escrow-ledger (the
 * transaction lookup behind PaymentResult.transactionId, and the transfer claims), chain-indexer on anvil, behind
 * one origin like the edge; the demo seller page; payments from a funded wallet on anvil.
 */
import { mkdirSync } from 'node:fs';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { usdcAbi } from '@paygate/chain';
import { loadConfig as loadIndexerConfig, startChainIndexer } from '@paygate/chain-indexer';
import { type DemoSeller, startDemoSeller } from '@paygate/deploy/demo';
import { startEdge } from '@paygate/deploy/edge';
import {
  loadConfig as loadLedgerConfig,
  type RunningEscrowLedger,
  startEscrowLedger,
} from '@paygate/escrow-ledger';
import { parseUsdc } from '@paygate/money';
import { loadConfig as loadNotifierConfig, type RunningNotifier, startNotifier } from '@paygate/notifier';
import {
  type AnvilInstance,
  CHROMIUM_LAUNCH_OPTIONS,
  createTestEnvironment,
  deployTestUsdc,
  fundTestWallets,
  minedReceipt,
  startAnvil,
  type TestEnvironment,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract, getBytes, Wallet } from 'ethers';
import { type Browser, chromium, type Page } from 'playwright-core';
import { type CheckoutHarness, publishSkill, skillEvent, startHarness } from './helpers';

const SCREENSHOTS = path.join(__dirname, '../../../artifacts/screenshots');
/**
 * One origin for the browser, routed by the dev edge from deploy/routes.json (as in `make dev`): the widget's
 * /api/v1/ws to notifier, /api/v1/transactions to escrow-ledger, /api/v1/checkout and /static to checkout.
 */
async function startOrigin(
  checkoutUrl: string,
  notifierUrl: string,
  ledgerUrl: string,
): Promise<{ url: string; server: http.Server }> {
  const server = await startEdge({
    port: 0,
    upstreams: { checkout: checkoutUrl, notifier: notifierUrl, 'escrow-ledger': ledgerUrl },
    proxyTimeoutMs: 10_000,
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('checkout widget in a real browser', () => {
  let env: TestEnvironment;
  let anvil: AnvilInstance;
  let usdcAddress: string;
  let h: CheckoutHarness;
  let notifier: RunningNotifier;
  let ledger: RunningEscrowLedger;
  let indexer: Awaited<ReturnType<typeof startChainIndexer>>;
  let origin: { url: string; server: http.Server };
  let demo: DemoSeller;
  let browser: Browser;

  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    env = await createTestEnvironment('cobrowser');
    anvil = await startAnvil();
    usdcAddress = (await deployTestUsdc(anvil.rpcUrl)).address;
    await fundTestWallets({
      rpcUrl: anvil.rpcUrl,
      usdcAddress,
      amountMicro: 1_000_000_000n,
      roles: ['buyer'],
    });
    // A session is paid by its unique amount at the checkout wallet (or, the seller's choice, at its own deposit
    // address), never at the agent escrow: the widget shows and pays what the session says.
    const chainEnv = {
      USDC_ADDRESS: usdcAddress,
      ESCROW_ADDRESS: testWallets.escrow.address,
      CHECKOUT_ESCROW_ADDRESS: testWallets.checkoutEscrow.address,
    };
    // The real ledger books each paid session and answers the transfer claims (as in production).
    ledger = await startEscrowLedger(
      loadLedgerConfig(env.envFor('escrow-ledger', { ...chainEnv, CHAIN_RPC_URL: anvil.rpcUrl })),
    );
    h = await startHarness('cobrowser', { ...chainEnv, SWEEP_INTERVAL_MS: '200' }, { env, claims: 'ledger' });
    await publishSkill(h, skillEvent(h, { name: 'demo-report' }, ['2.5']));
    indexer = await startChainIndexer(
      loadIndexerConfig(
        env.envFor('chain-indexer', { ...chainEnv, CHAIN_RPC_URL: anvil.rpcUrl, CONFIRMATIONS: '1' }),
      ),
    );
    notifier = await startNotifier(loadNotifierConfig(env.envFor('notifier')));
    origin = await startOrigin(h.url, notifier.url, ledger.url);
    demo = await startDemoSeller({
      port: 0,
      paygateBaseUrl: origin.url,
      publishableKey: h.publishableKey,
      skill: 'demo-report',
      title: 'Demo report shop',
    });
    browser = await chromium.launch(CHROMIUM_LAUNCH_OPTIONS);
  }, 120_000);

  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    await demo?.stop();
    origin?.server.closeAllConnections();
    await new Promise((r) => origin?.server.close(r));
    await notifier?.stop();
    await indexer?.stop();
    await h?.stop();
    await ledger?.stop();
    await anvil?.stop();
    await env?.cleanup();
  });

  /** The seller's checkout setting, as the registry publishes it (revision 2, once). */
  async function setMatching(matching: 'amount' | 'deposit_address') {
    await h.publish('seller.updated', {
      sellerId: h.sellerId,
      revision: 2,
      walletAddress: testWallets.seller.address,
      payoutAddress: testWallets.seller.address,
      publishableKey: h.publishableKey,
      apiKeyVersion: 1,
      webhookUrl: null,
      webhookSecretVersion: 0,
      settlementFrequency: 'DAILY',
      minimumSettlement: '10',
      checkoutMatching: matching,
      updatedAt: new Date().toISOString(),
    });
    await waitFor(
      async () =>
        (
          await h.service.ctx.db
            .selectFrom('sellers')
            .select('checkout_matching')
            .where('seller_id', '=', h.sellerId)
            .executeTakeFirstOrThrow()
        ).checkout_matching === matching,
      { message: `seller's checkout setting ${matching}` },
    );
  }

  /**
   * The widget's transaction lookups (the only path to onSuccess): how many are in flight, and how many ended
   * its lookup (an answer other than "not booked yet, ask again", or a failed request).
   */
  const lookups = new WeakMap<Page, { inFlight: number; ended: number }>();
  function trackLookups(page: Page) {
    const state = { inFlight: 0, ended: 0 };
    lookups.set(page, state);
    const isLookup = (url: string) => url.includes('/api/v1/transactions/lookup');
    page.on('request', (request) => {
      if (isLookup(request.url())) state.inFlight++;
    });
    page.on('requestfailed', (request) => {
      if (!isLookup(request.url())) return;
      state.inFlight--;
      state.ended++;
    });
    page.on('requestfinished', async (request) => {
      if (!isLookup(request.url())) return;
      const body = await (await request.response())?.json().catch(() => ({}));
      if (body?.error?.code !== 'transaction_not_found') state.ended++;
      state.inFlight--;
    });
  }

  async function openDialog(page: Page, name: string) {
    trackLookups(page);
    await page.goto(demo.url);
    const button = page.getByRole('button', { name: 'Buy with USDC' });
    await button.focus();
    await page.keyboard.press('Enter'); // keyboard-usable
    const dialog = page.getByRole('dialog', { name: 'Pay with USDC' });
    await dialog.locator('[data-paygate="amount"]').waitFor({ timeout: 10_000 });
    const amount = (await dialog.locator('[data-paygate="amount"]').textContent())!.trim();
    const address = (await dialog.locator('[data-paygate="address"]').textContent())!.trim();
    const uri = await dialog.locator('[data-paygate="qr"]').getAttribute('data-uri');
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-dialog.png`) });
    return { dialog, amount, address, uri };
  }

  async function payFromWallet(address: string, amount: string) {
    const usdc = new Contract(usdcAddress, usdcAbi, testSigner('buyer', anvil.provider));
    const tx = await usdc.getFunction('transfer')(address, parseUsdc(amount));
    await minedReceipt(tx);
    return tx.hash as string;
  }

  async function expectPaidOnce(page: Page, txHash: string, amount: string, address: string, name: string) {
    const dialog = page.getByRole('dialog');
    await dialog.locator('[data-paygate="final"]').getByText('Payment received').waitFor({ timeout: 20_000 });
    // Positive signals before counting: the widget stopped listening (no further status can reach it), no
    // lookup is in flight, and every lookup that ended has reached onSuccess. A duplicate would show by then.
    const tracked = lookups.get(page)!;
    const successes = await waitFor(
      async () => {
        const [liveMode, fired] = await page.evaluate(() => [
          (window as any).paygateCheckout.liveMode,
          (window as any).paygateEvents.success,
        ]);
        return liveMode === 'idle' &&
          tracked.inFlight === 0 &&
          tracked.ended > 0 &&
          fired.length >= tracked.ended
          ? (fired as any[])
          : undefined;
      },
      { timeoutMs: 15_000, message: 'the widget never settled after the payment' },
    );
    expect(tracked.ended).toBe(1);
    expect(successes).toHaveLength(1);
    expect(successes[0]).toMatchObject({
      status: 'paid',
      txHash: txHash.toLowerCase(),
      amount,
      exactAmount: amount,
      payer: testWallets.buyer.address,
      walletAddress: address,
      chainId: 31337,
    });
    // transactionId is the ledger's own id of this payment: what the public lookup (the buyer's route to a
    // refund) answers for the paid session and for the transfer, and what the ledger booked for this tx hash.
    const { transactionId, sessionId } = successes[0];
    expect(transactionId).toMatch(/^txn_[0-9A-Z]{26}$/);
    const lookup = async (query: string) => {
      const response = await fetch(`${origin.url}/api/v1/transactions/lookup?${query}`);
      expect(response.status).toBe(200);
      return (await response.json()) as { transactionId: string; sessionId: string; amount: string };
    };
    const bySession = await lookup(`sessionId=${sessionId}`);
    expect(bySession.transactionId).toBe(transactionId);
    expect(parseUsdc(bySession.amount)).toBe(parseUsdc(amount));
    expect(await lookup(`txHash=${txHash}`)).toMatchObject({ transactionId, sessionId });
    const booked = await ledger.ctx.db
      .selectFrom('transactions')
      .select(['id', 'session_id'])
      .where('tx_hash', '=', txHash.toLowerCase())
      .execute();
    expect(booked).toEqual([{ id: transactionId, session_id: sessionId }]);
    expect(await page.locator('[data-demo="result"]').textContent()).toContain(txHash.toLowerCase());
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-success.png`) });
    return successes[0] as { transactionId: string; sessionId: string };
  }

  /**
   * The widget's requestRefund, called in the page with an EIP-1193 wallet backed by a test key (personal_sign),
   * against the origin the widget script came from. Resolves to the request, or to the ApiError's fields.
   */
  async function requestRefundInPage(page: Page, signer: Wallet, transactionId: string, reason: string) {
    const binding = `__sign_${signer.address.slice(2, 10)}`;
    await page.exposeFunction(binding, (hex: string) => signer.signMessage(getBytes(hex)));
    return page.evaluate(
      async ({ binding, account, transactionId, reason }) => {
        const ethereum = {
          request: async ({ method, params }: { method: string; params?: unknown[] }) => {
            if (method === 'eth_requestAccounts') return [account];
            // The local chain (31337): the refund request is signed for it.
            if (method === 'eth_chainId') return '0x7a69';
            if (method === 'personal_sign') return (window as any)[binding](params![0]);
            throw Object.assign(new Error(`unsupported ${method}`), { code: 4200 });
          },
        };
        try {
          return await (window as any).PaygateCheckout.requestRefund({ transactionId, reason, ethereum });
        } catch (e) {
          const { status, code, field } = e as { status: number; code: string; field?: string };
          return { error: { status, code, field } };
        }
      },
      { binding, account: signer.address.toLowerCase(), transactionId, reason },
    );
  }

  it('pays through the dialog and learns of it over the WebSocket; onSuccess fires once', async () => {
    const page = await browser.newPage({ viewport: { width: 375, height: 740 } }); // phone width
    try {
      const { dialog, amount, address, uri } = await openDialog(page, 'websocket');
      // The default: the checkout wallet every session shares (never the agent escrow), and the price plus a
      // unique suffix below a cent, shown with all six decimals.
      expect(address).toBe(testWallets.checkoutEscrow.address);
      expect(amount).toMatch(/^2\.50\d{4}$/);
      expect(parseUsdc(amount)).toBeGreaterThan(2_500_000n);
      // What the buyer reads is true: the exact amount identifies the payment; the purchase is named by the skill
      // and the endpoint's description, not by its method and path.
      expect(await dialog.locator('[data-paygate="instructions"]').textContent()).toBe(
        `Send exactly ${amount} USDC on local to the address below, all six decimals included. The exact amount identifies your payment: a different amount will not be matched automatically.`,
      );
      expect(await dialog.locator('[data-paygate="description"]').textContent()).toBe(
        'Skill demo-report: item 0',
      );
      expect(uri).toBe(
        `ethereum:${usdcAddress}@31337/transfer?address=${address}&uint256=${parseUsdc(amount)}`,
      );
      expect(await dialog.getAttribute('aria-modal')).toBe('true');
      expect(await dialog.locator('[role="timer"]').textContent()).toMatch(/^1[45]:\d\d$/);
      await expect(dialog.getByRole('button', { name: 'Copy amount (usdc)' }).count()).resolves.toBe(1);
      await waitFor(
        async () => (await page.evaluate(() => (window as any).paygateCheckout.liveMode)) === 'websocket',
      );
      // The dialog fits a phone: nothing wider than the viewport.
      const width = await dialog.evaluate((node) => node.getBoundingClientRect().width);
      expect(width).toBeLessThanOrEqual(375);
      const txHash = await payFromWallet(address, amount);
      const { transactionId } = await expectPaidOnce(page, txHash, amount, address, 'websocket');
      expect(await page.evaluate(() => (window as any).paygateCheckout.liveMode)).not.toBe('polling');

      // The buyer asks for a refund from the page with the widget's requestRefund, naming the PaymentResult's
      // transactionId: only the paying wallet's signature counts (the ledger checks agent-client's message).
      const stranger = new Wallet(testWallets.stranger.privateKey);
      expect(await requestRefundInPage(page, stranger, transactionId, 'not mine')).toEqual({
        error: { status: 403, code: 'not_payer', field: 'signature' },
      });
      const buyer = new Wallet(testWallets.buyer.privateKey);
      const request = await requestRefundInPage(page, buyer, transactionId, 'changed my mind');
      expect(request).toMatchObject({
        id: expect.stringMatching(/^rrq_/),
        status: 'pending',
        transactionId,
        reason: 'changed my mind',
      });
      expect(
        await page.evaluate((id) => (window as any).PaygateCheckout.refundRequestStatus(id), request.id),
      ).toMatchObject({ id: request.id, status: 'pending', refund: null });
    } finally {
      await page.close();
    }
  });

  it('falls back to polling when the WebSocket is blocked (a seller that chose deposit addresses)', async () => {
    await setMatching('deposit_address');
    const page = await browser.newPage({ viewport: { width: 1024, height: 800 } });
    // Every socket fails at once, as behind a proxy that refuses upgrades.
    await page.addInitScript(() => {
      (window as any).WebSocket = class BlockedSocket extends EventTarget {
        constructor() {
          super();
          setTimeout(() => {
            this.dispatchEvent(new Event('error'));
            this.dispatchEvent(new Event('close'));
          }, 10);
        }
        send() {}
        close() {}
      };
    });
    const polls: string[] = [];
    page.on('request', (request) => {
      if (request.method() === 'GET' && /\/api\/v1\/checkout\/sessions\/cs_/.test(request.url()))
        polls.push(request.url());
    });
    try {
      const { dialog, amount, address } = await openDialog(page, 'polling');
      // The session's own address, at exactly the price: the address identifies the payment.
      expect(address).not.toBe(testWallets.checkoutEscrow.address);
      expect(address).not.toBe(testWallets.escrow.address);
      expect(amount).toBe('2.500000');
      expect(await dialog.locator('[data-paygate="instructions"]').textContent()).toBe(
        'Send exactly 2.500000 USDC on local to the address below. This address is for this payment only: it identifies your payment.',
      );
      await waitFor(
        async () => (await page.evaluate(() => (window as any).paygateCheckout.liveMode)) === 'polling',
      );
      const txHash = await payFromWallet(address, amount);
      await expectPaidOnce(page, txHash, amount, address, 'polling');
      expect(polls.length).toBeGreaterThan(0);
    } finally {
      await page.close();
    }
  });

  it('shows an expired session as expired and calls onExpired', async () => {
    const page = await browser.newPage({ viewport: { width: 375, height: 740 } });
    try {
      await openDialog(page, 'expiry');
      h.clock.advanceSeconds(901); // checkout's injected clock; the sweeper expires the session
      const dialog = page.getByRole('dialog');
      await dialog.locator('[data-paygate="final"]').getByText('expired').waitFor({ timeout: 15_000 });
      expect(await dialog.locator('[role="status"]').getAttribute('data-state')).toBe('expired');
      const expired = await page.evaluate(() => (window as any).paygateEvents.expired);
      expect(expired).toHaveLength(1);
      expect(expired[0].status).toBe('expired');
      expect(await page.evaluate(() => (window as any).paygateEvents.success)).toHaveLength(0);
      await page.screenshot({ path: path.join(SCREENSHOTS, 'expiry-expired.png') });
      // Escape closes the dialog and focus returns to the pay button.
      await page.keyboard.press('Escape');
      await expect(page.getByRole('dialog').count()).resolves.toBe(0);
      expect(await page.evaluate(() => document.activeElement?.getAttribute('data-paygate'))).toBe(
        'pay-button',
      );
    } finally {
      await page.close();
    }
  });
});
