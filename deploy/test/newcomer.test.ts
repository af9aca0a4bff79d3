/**
 * The newcomer's path: what `make dev` prints (operator token, the deployer that mints test USDC and the mint
 * command, the demo names and button texts) says the same as README.md and the demo page, and the mint helper
 * really mints on a local chain.
 *
 *   npx jest deploy/test/newcomer
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { usdcAbi } from '@paygate/chain';
import { type AnvilInstance, deployTestUsdc, startAnvil, testWallets } from '@paygate/testing';
import { Contract, Wallet } from 'ethers';
import { renderDemoPage } from '../demo';
import {
  browserPortWarnings,
  DEAD_LETTERS_COMMAND,
  DEMO,
  MINT_COMMAND,
  renderDevSummary,
} from '../dev/summary';

const ROOT = path.join(__dirname, '../..');
const OPERATOR_TOKEN = 'dev-operator-token-not-secret';

describe('what make dev prints, README.md and the demo page', () => {
  const printed = renderDevSummary({
    publicBaseUrl: 'http://localhost:8080',
    operatorToken: OPERATOR_TOKEN,
    chain: {
      rpcUrl: 'http://127.0.0.1:8545',
      chainId: 31337,
      usdcAddress: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
      wallets: testWallets,
    },
    infra: {
      databaseUrl: 'postgres://postgres@127.0.0.1:5432/test',
      natsUrl: 'nats://127.0.0.1:4222',
      started: [],
    },
    eventNamespace: 'dev',
    seller: { address: testWallets.seller.address, sellerId: 'sel_1', apiKey: 'sk_test_0123456789abcdef' },
    pageUrl: 'http://127.0.0.1:8090',
    sellerKeyFile: '.dev/demo-seller-key',
  });
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const page = renderDemoPage({
    title: 'Demo shop',
    paygateBaseUrl: 'http://localhost:8080',
    scriptUrl: 'http://localhost:8080/static/paygate-checkout.js',
    publishableKey: 'pk_test',
    skill: DEMO.productSkill,
    devWalletAddress: testWallets.buyer.address,
  });
  const widgetDialog = readFileSync(path.join(ROOT, 'libs/checkout-widget/src/dialog.ts'), 'utf8');

  it('the console prints the operator token, the deployer key and the mint command', () => {
    expect(printed).toContain(`operator token    ${OPERATOR_TOKEN}`);
    expect(printed).toContain(
      `deployer  ${testWallets.deployer.address}  key ${testWallets.deployer.privateKey}`,
    );
    expect(printed).toContain(`${MINT_COMMAND} <address> 100`);
    expect(readme).toContain(`${MINT_COMMAND} <address> 100`);
    expect(readme).toMatch(/operator token/);
  });

  it("the console never prints the demo seller's secret key, only the file that holds it, and how to settle now", () => {
    expect(printed).not.toContain('sk_test_0123456789abcdef');
    expect(printed).not.toContain('sk_test_0123');
    expect(printed).toContain('$(cat .dev/demo-seller-key)');
    expect(printed).toContain('/api/v1/operator/settlements/run');
    expect(readme).toContain('/api/v1/operator/settlements/run');
  });

  it('console and README give the dead-letter command with the namespace make dev uses (the tool defaults to paygate)', () => {
    expect(printed).toContain(`EVENT_NAMESPACE=dev ${DEAD_LETTERS_COMMAND}`);
    expect(readme).toContain(`EVENT_NAMESPACE=dev ${DEAD_LETTERS_COMMAND}`);
  });

  it('warns when DEV_PORT_OFFSET puts the edge or the demo page on a port browsers refuse (10080)', () => {
    expect(browserPortWarnings({ edge: 9080, 'demo page': 9090 })).toEqual([]);
    const warnings = browserPortWarnings({ edge: 10080, 'demo page': 10090 });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^edge port 10080 .*DEV_PORT_OFFSET/);
  });

  it('console, README and page name the same demo skills and the same buttons', () => {
    for (const text of [DEMO.apiSkill, DEMO.productSkill, DEMO.buyButton, DEMO.walletButton]) {
      expect({ text, inConsole: printed.includes(text) }).toEqual({ text, inConsole: true });
      expect({ text, inReadme: readme.includes(text) }).toEqual({ text, inReadme: true });
    }
    expect(page).toContain(`buttonLabel: '${DEMO.buyButton}'`);
    expect(page).toContain(`"${DEMO.walletButton}"`);
    expect(widgetDialog).toContain(`'${DEMO.walletButton}'`);
    // The old wording the README and console used before, which matched no button on the page.
    expect(readme).not.toMatch(/pay from the (dev )?test wallet/i);
    expect(printed).not.toMatch(/pay from the (dev )?test wallet/i);
  });
});

describe('deploy/dev/mint.ts', () => {
  let anvil: AnvilInstance;
  let usdcAddress: string;

  beforeAll(async () => {
    anvil = await startAnvil();
    ({ address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl));
  });

  afterAll(async () => {
    await anvil?.stop();
  });

  /** Runs the helper as a newcomer would (its own process, arguments on the command line). */
  async function mint(...args: string[]): Promise<{ code: number | null; output: string }> {
    const proc = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(ROOT, 'deploy/dev/mint.ts'), ...args],
      {
        cwd: ROOT,
        env: { ...process.env, CHAIN_RPC_URL: anvil.rpcUrl, USDC_ADDRESS: usdcAddress },
      },
    );
    let output = '';
    proc.stdout.on('data', (chunk) => {
      output += chunk;
    });
    proc.stderr.on('data', (chunk) => {
      output += chunk;
    });
    const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
    return { code, output };
  }

  it('mints test USDC to any address as the deployer, and refuses a bad amount naming it', async () => {
    const recipient = Wallet.createRandom().address;
    const ok = await mint(recipient, '2.5');
    expect(ok).toMatchObject({ code: 0 });
    expect(ok.output).toContain(`minted 2.5 USDC to ${recipient}`);
    const usdc = new Contract(usdcAddress, usdcAbi, anvil.provider);
    expect(await usdc.getFunction('balanceOf')(recipient)).toBe(2_500_000n);

    const bad = await mint(recipient, '1.0000001');
    expect(bad.code).toBe(1);
    expect(bad.output).toContain('amount: must be a positive USDC amount with at most 6 decimals');
  }, 60_000);
});

describe('deploy/scripts/dead-letters.ts', () => {
  it('in a namespace without services, names the stream it looked for and how to choose the namespace', async () => {
    const proc = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(ROOT, 'deploy/scripts/dead-letters.ts'), 'list'],
      {
        cwd: ROOT,
        env: { ...process.env, EVENT_NAMESPACE: `nobody${Date.now()}` },
      },
    );
    let output = '';
    proc.stdout.on('data', (chunk) => {
      output += chunk;
    });
    proc.stderr.on('data', (chunk) => {
      output += chunk;
    });
    const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
    expect(code).toBe(1);
    expect(output).toMatch(
      /no dead-letter stream NOBODY\d+_DLQ on nats:\/\/.*set EVENT_NAMESPACE .*make dev uses dev/,
    );
  }, 60_000);
});
