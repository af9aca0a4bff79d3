/**
 * The paywall for people, in Chromium at phone width with an injected EIP-1193 wallet (announced the EIP-6963 way)
 * backed by a test key: a browser that opens a paid URL gets a page saying what it costs and why; paying with a
 * gasless EIP-3009 signature (settled by the relayer) or, with a wallet that cannot sign typed data, with a USDC
 * transfer and Paygate's proof, shows the seller's answer. API clients keep getting the JSON 402. axe-core finds
 * nothing serious on the page.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { usdcAbi } from '@paygate/chain';
import type { RunningSettlement } from '@paygate/settlement';
import { CHROMIUM_LAUNCH_OPTIONS, testWallets } from '@paygate/testing';
import { Contract, getBytes, Wallet } from 'ethers';
import { type Browser, chromium, type Page } from 'playwright-core';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';
import { startRelayer } from './relayer';

const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const SCREENSHOTS = path.join(__dirname, '../../../artifacts/paywall');
type Upstream = Awaited<ReturnType<typeof startUpstream>>;

describe('the paywall page: a browser pays a paid URL with its wallet', () => {
  let h: Harness;
  let upstream: Upstream;
  let settlement: RunningSettlement;
  let browser: Browser;

  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    h = await startHarness('paywall', { RATE_LIMIT_PER_MINUTE: '100000', CONFIRMATIONS: '1' });
    upstream = await startUpstream();
    settlement = await startRelayer(h);
    await h.publishSkill(
      skillSnapshot({ name: 'wx', displayName: 'Weather', apiBaseUrl: `${upstream.url}/seller` }),
    );
    browser = await chromium.launch(CHROMIUM_LAUNCH_OPTIONS);
  });

  afterAll(async () => {
    await browser?.close();
    await settlement?.stop();
    await upstream?.close();
    await h?.stop();
  });

  const url = () => `${h.gateway.url}/api/v1/skills/wx/data`;
  const balanceOf = (address: string) =>
    new Contract(h.usdcAddress, usdcAbi, h.anvil.provider).getFunction('balanceOf')(
      address,
    ) as Promise<bigint>;

  /**
   * A page whose wallet is `signer`, announced by EIP-6963: accounts, chain id, typed-data and message signatures
   * by the key (in Node), transfers sent by the key and receipts read from anvil. `typedData: false` makes it a
   * wallet that cannot sign typed data (4200); `cancel` makes the user refuse every request (4001).
   */
  async function pageWithWallet(options: { typedData?: boolean; cancel?: boolean } = {}): Promise<Page> {
    const signer = new Wallet(testWallets.buyer.privateKey, h.anvil.provider);
    const page = await browser.newPage({ viewport: { width: 375, height: 740 } });
    await page.exposeFunction('__wallet', async (method: string, params: unknown[]) => {
      if (options.cancel && method !== 'eth_chainId')
        return { error: { code: 4001, message: 'User rejected' } };
      switch (method) {
        case 'eth_requestAccounts':
          return { result: [signer.address.toLowerCase()] };
        case 'eth_chainId':
          return { result: `0x${(await h.anvil.provider.getNetwork()).chainId.toString(16)}` };
        case 'eth_signTypedData_v4': {
          if (options.typedData === false) return { error: { code: 4200, message: 'Unsupported method' } };
          const { domain, types, message } = JSON.parse(params[1] as string);
          delete types.EIP712Domain;
          return { result: await signer.signTypedData(domain, types, message) };
        }
        case 'eth_sendTransaction': {
          const { to, data } = params[0] as { to: string; data: string };
          return { result: (await signer.sendTransaction({ to, data })).hash };
        }
        case 'eth_getTransactionReceipt':
          return { result: await h.anvil.provider.send('eth_getTransactionReceipt', params) };
        case 'personal_sign':
          return { result: await signer.signMessage(getBytes(params[0] as string)) };
        default:
          return { error: { code: 4200, message: `unsupported ${method}` } };
      }
    });
    await page.addInitScript(() => {
      const provider = {
        request: async ({ method, params }: { method: string; params?: unknown[] }) => {
          const answer = await (window as any).__wallet(method, params ?? []);
          if (answer.error) throw Object.assign(new Error(answer.error.message), { code: answer.error.code });
          return answer.result;
        },
      };
      const info = {
        uuid: '0b1c2d3e-0000-4000-8000-000000000001',
        name: 'Test Wallet',
        icon: 'data:,',
        rdns: 'test',
      };
      const announce = () =>
        window.dispatchEvent(
          new CustomEvent('eip6963:announceProvider', { detail: Object.freeze({ info, provider }) }),
        );
      window.addEventListener('eip6963:requestProvider', announce);
      announce();
    });
    return page;
  }

  it('API clients still get the JSON 402; a browser gets the page with the same offer', async () => {
    for (const accept of [undefined, '*/*', 'application/json', 'application/json, text/html']) {
      const res = await fetch(url(), { headers: accept ? { accept } : {} });
      expect({ accept, status: res.status, type: res.headers.get('content-type') }).toMatchObject({
        status: 402,
        type: expect.stringContaining('application/json'),
      });
    }
    const page = await pageWithWallet();
    try {
      const response = await page.goto(url());
      expect(response!.status()).toBe(402);
      expect(response!.headers()['payment-required']).toBeTruthy();
      expect(response!.headers()['content-security-policy']).toContain("script-src 'nonce-");
      expect(await page.title()).toBe('Pay 0.05 USDC: Weather');
      await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe('Weather');
      await expect(
        page.getByRole('button', { name: 'Pay 0.05 USDC with your wallet' }).count(),
      ).resolves.toBe(1);
      // Nothing wider than a phone.
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
      await page.evaluate(AXE_SOURCE);
      const { violations } = (await page.evaluate(() => (window as any).axe.run())) as {
        violations: Array<{ id: string; impact: string }>;
      };
      expect(violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')).toEqual([]);
      await page.screenshot({ path: path.join(SCREENSHOTS, 'paywall-phone.png'), fullPage: true });
    } finally {
      await page.close();
    }
  });

  it('pays with a gasless signature and shows the answer; the buyer spends no ETH', async () => {
    const page = await pageWithWallet();
    const escrowBefore = await balanceOf(testWallets.escrow.address);
    const ethBefore = await h.anvil.provider.getBalance(testWallets.buyer.address);
    const callsBefore = upstream.requests.filter((r) => r.method === 'GET').length;
    try {
      await page.goto(url());
      await page.getByRole('button', { name: /^Pay 0.05 USDC/ }).click();
      await page.getByRole('heading', { name: 'Your result' }).waitFor({ timeout: 30_000 });
      expect(JSON.parse((await page.locator('#output').textContent())!)).toMatchObject({
        ok: true,
        method: 'GET',
      });
      await expect(page.locator('#receipt').textContent()).resolves.toMatch(
        /^Paid 0.05 USDC in transaction 0x[0-9a-f]{64}\.$/,
      );
      // Focus moves to the result, for screen readers and keyboards.
      expect(await page.evaluate(() => document.activeElement?.id)).toBe('result-title');
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
      await page.screenshot({ path: path.join(SCREENSHOTS, 'paywall-paid.png'), fullPage: true });
    } finally {
      await page.close();
    }
    expect(upstream.requests.filter((r) => r.method === 'GET').length).toBe(callsBefore + 1);
    expect((await balanceOf(testWallets.escrow.address)) - escrowBefore).toBe(50_000n);
    expect(await h.anvil.provider.getBalance(testWallets.buyer.address)).toBe(ethBefore);
  });

  it('pays with a USDC transfer and Paygate’s proof when the wallet cannot sign typed data', async () => {
    const page = await pageWithWallet({ typedData: false });
    const escrowBefore = await balanceOf(testWallets.escrow.address);
    try {
      await page.goto(url());
      await page.getByRole('button', { name: /^Pay 0.05 USDC/ }).click();
      await page.getByRole('heading', { name: 'Your result' }).waitFor({ timeout: 60_000 });
      expect(JSON.parse((await page.locator('#output').textContent())!)).toMatchObject({ ok: true });
    } finally {
      await page.close();
    }
    expect((await balanceOf(testWallets.escrow.address)) - escrowBefore).toBe(50_000n);
  });

  it('says so when the user cancels, and nothing is paid', async () => {
    const page = await pageWithWallet({ cancel: true });
    const escrowBefore = await balanceOf(testWallets.escrow.address);
    try {
      await page.goto(url());
      await page.getByRole('button', { name: /^Pay 0.05 USDC/ }).click();
      await page.getByText('You cancelled the payment; nothing was paid.').waitFor({ timeout: 10_000 });
      expect(await page.getByRole('button', { name: /^Pay 0.05 USDC/ }).isEnabled()).toBe(true);
    } finally {
      await page.close();
    }
    expect(await balanceOf(testWallets.escrow.address)).toBe(escrowBefore);
  });
});
