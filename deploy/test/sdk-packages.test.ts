import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { usdcAbi } from '@paygate/chain';
import { parseUsdc } from '@paygate/money';
import {
  CHROMIUM_LAUNCH_OPTIONS,
  createActiveSkill,
  minedReceipt,
  signUpSeller,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { ExactEvmScheme } from '@x402/evm';
import { decodePaymentResponseHeader, wrapFetchWithPaymentFromConfig } from '@x402/fetch';
import { Contract, Wallet } from 'ethers';
import { type Browser, chromium } from 'playwright-core';
import { privateKeyToAccount } from 'viem/accounts';
import { startEdge } from '../dev/edge';
import { type AllServices, startAllServices } from './all-services';

const run = promisify(execFile);
const ROOT = path.join(__dirname, '../..');

/**
 * The SDKs sellers and agents install from npm: each builds (`pnpm run build`) to plain JavaScript (ESM and
 * CommonJS) with one bundled .d.ts and its own package.json, the private workspace libraries (money, chain…)
 * inlined, and that output runs in a plain Node process (no tsx) exporting exactly what the source package exports;
 * a consumer imports it by name from CommonJS and ESM and type-checks against its types.
 */
const SDKS = [
  {
    dir: 'libs/agent-client',
    load: () => require('@paygate/agent-client'),
    // A round trip through the built code.
    smoke: `const p = { txHash: '0x' + '1'.repeat(64), amount: '0.05', token: '0x' + '2'.repeat(40),
      network: 'local', from: '0x' + '3'.repeat(40), to: '0x' + '4'.repeat(40), signature: '0x' + '5'.repeat(130) };
      out.smoke = m.decodePaymentHeader(m.encodePaymentHeader(p)).amount;`,
    expected: '0.05',
    // What a TypeScript consumer writes: typed imports by the package name, and a misuse the types refuse.
    consumer: `import { decodePaymentHeader, encodePaymentHeader, type PaymentProof } from '@paygate/agent-client';
      export const header: string = encodePaymentHeader({} as PaymentProof);
      export const amount: string = decodePaymentHeader(header).amount;
      // @ts-expect-error a proof is an object, not a number
      encodePaymentHeader(42);`,
  },
  {
    dir: 'libs/gateway-middleware',
    load: () => require('@paygate/gateway-middleware'),
    smoke: `const signature = m.signWebhook({ secret: 's', payload: '{}', timestamp: 1 });
      out.smoke = signature.startsWith('t=1,v1=') ? 'signed' : signature;`,
    expected: 'signed',
    consumer: `import { type Gateway, signWebhook } from '@paygate/gateway-middleware';
      export const signature: string = signWebhook({ secret: 's', payload: '{}', timestamp: 1 });
      export type Middleware = Gateway;
      // @ts-expect-error the secret is required
      signWebhook({ payload: '{}' });`,
  },
  {
    dir: 'libs/checkout-widget',
    load: () => require('@paygate/checkout-widget'),
    smoke: 'out.smoke = m.formatUsdcExact(1234567n);',
    expected: '1.234567',
    consumer: `import { type CheckoutOptions, createCheckout, formatUsdcExact } from '@paygate/checkout-widget';
      export const text: string = formatUsdcExact(1234567n);
      export const open = (options: CheckoutOptions) => createCheckout(options).open();
      // @ts-expect-error amounts are bigint micro-USDC, never strings
      formatUsdcExact('1.5');`,
  },
  {
    dir: 'libs/mcp-paywall',
    load: () => require('@paygate/mcp-paywall'),
    smoke: 'out.smoke = m.MCP_PAYMENT_META;',
    expected: 'x402/payment',
    consumer: `import { createPaywall, type ToolResult } from '@paygate/mcp-paywall';
      const paid = createPaywall({ apiKey: 'sk_x', apiBaseUrl: 'https://paygate.example' });
      export const tool = paid({ tool: 'quote', price: '0.05' }, async (): Promise<ToolResult> => ({ content: [] }));
      // @ts-expect-error the price is required
      paid({ tool: 'quote' }, async () => ({ content: [] }));`,
  },
];

jest.setTimeout(600_000);

/** Where the tarballs go, and the consumer's empty folder: outside the workspace. */
const WORK = mkdtempSync(path.join(os.tmpdir(), 'paygate-sdk-consumer-'));
/** The build folder's name inside each package (so the built code resolves the package's own npm dependencies). */
const OUT_DIR_NAME = path.basename(mkdtempSync(path.join(WORK, '.sdk-build-')));
interface Packed {
  name: string;
  tarball: string;
  size: number;
  files: string[];
}
let builtAndPacked: Promise<Record<string, { outDir: string; packed: Packed }>> | undefined;

/**
 * Every public package built (`build-sdk.ts --all`: what each package's `build` script does, with one TypeScript
 * program for all their declarations) and packed (`--pack`), as a maintainer releasing them would, in one process;
 * once, shared by both halves of this suite.
 */
function buildAndPack(dir: string): Promise<{ outDir: string; packed: Packed }> {
  builtAndPacked ??= (async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      SDK_OUT_DIR: OUT_DIR_NAME,
      SDK_PACK_DIR: path.join(WORK, 'tarballs'),
    };
    delete env.NODE_OPTIONS;
    const script = path.join(ROOT, 'deploy/scripts/build-sdk.ts');
    const tsx = require.resolve('tsx/cli');
    const { stdout } = await run(process.execPath, [tsx, script, '--all', '--build', '--pack=unused'], {
      cwd: ROOT,
      env,
      timeout: 500_000,
    });
    const packed = stdout
      .trim()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Packed);
    return Object.fromEntries(
      SDKS.map(({ dir }) => {
        const name = JSON.parse(readFileSync(path.join(ROOT, dir, 'package.json'), 'utf8')).name as string;
        const found = packed.find((p) => p.name === name);
        if (!found) throw new Error(`${name} was not packed (is its paygateSdk field missing?)`);
        return [dir, { outDir: path.join(ROOT, dir, OUT_DIR_NAME), packed: found }];
      }),
    );
  })();
  return builtAndPacked.then((all) => all[dir]!);
}

/** The npm consumer: an empty folder outside the workspace where plain npm installs the tarballs. */
const APP = path.join(WORK, 'app');
/** What the consumer's own code needs besides the SDKs: express for the seller, the MCP SDK for the agent. */
const CONSUMER_PACKAGES = ['express@5', '@modelcontextprotocol/sdk@1.32.2'];
const OPERATOR_TOKEN = 'sdk-tarballs-operator-token-000';

/**
 * npm's install flags: the registry is asked only for what npm's cache does not hold. By default npm revalidates the
 * metadata of every package it resolves, one request each: the consumer's packages and the SDKs' dependencies (137
 * packages, all cached) took 160 s to install against 23 s with --prefer-offline on the busy shared machine, and
 * this suite's two installs 118 and 84 s against 60 and 40 s. The tarballs themselves are read from their files.
 */
const NPM_INSTALL = ['install', '--prefer-offline', '--no-audit', '--no-fund'];

/** The environment of a process that must not see the workspace's pnpm settings (an npm consumer's). */
function consumerEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^(npm_|pnpm_|NODE_OPTIONS$|NODE_PATH$)/i.test(key)) env[key] = value;
  }
  return env;
}

/**
 * Started as the suite starts, beside the build (which needs neither): the consumer's own npm packages, installed
 * by npm into the consumer folder (the tarballs' install later is the same command with the tarballs added, and
 * only adds them and their dependencies), and the whole system behind the edge. The build is CPU, the install
 * mostly the registry's answers, the system's start mostly Postgres and the chain.
 */
let consumerPackagesInstalled: Promise<unknown>;
/**
 * The tarballs' install, begun as soon as they are packed: it runs beside the first half's probes and type check
 * (they use the build folders, never the consumer folder) instead of after them.
 */
let tarballsInstalled: Promise<unknown>;
let edge: http.Server | undefined;
let baseUrl: string;
let servicesStarted: Promise<AllServices> | undefined;

beforeAll(async () => {
  mkdirSync(APP, { recursive: true });
  writeFileSync(path.join(APP, 'package.json'), JSON.stringify({ name: 'sdk-consumer', private: true }));
  consumerPackagesInstalled = run('npm', [...NPM_INSTALL, ...CONSUMER_PACKAGES], {
    cwd: APP,
    env: consumerEnv(),
    timeout: 240_000,
  });
  consumerPackagesInstalled.catch(() => undefined); // awaited before the tarballs' install
  buildAndPack(SDKS[0]!.dir).catch(() => undefined); // awaited by every test
  tarballsInstalled = (async () => {
    const tarballs: string[] = [];
    for (const dir of PUBLIC_SDKS) tarballs.push((await buildAndPack(dir)).packed.tarball);
    await consumerPackagesInstalled;
    await run('npm', [...NPM_INSTALL, ...tarballs, ...CONSUMER_PACKAGES], {
      cwd: APP,
      env: consumerEnv(),
      timeout: 240_000,
    });
  })();
  tarballsInstalled.catch(() => undefined); // awaited by the second half
  // The edge first, on a port the OS picks (the services need its URL); it learns their URLs once they run.
  const upstreams: Record<string, string> = {};
  edge = await startEdge({ port: 0, upstreams });
  baseUrl = `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
  servicesStarted = startAllServices({
    label: 'sdktgz',
    operatorToken: OPERATOR_TOKEN,
    publicBaseUrl: baseUrl,
    // x402's relayer, for the middleware's PAYMENT-SIGNATURE path. The widget's session is paid its exact amount
    // at the one checkout wallet: checkout, the indexer (which reports its transfers) and the ledger all know it.
    extra: {
      settlement: { RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey, TRANSFER_POLL_INTERVAL_MS: '200' },
      checkout: { CHECKOUT_ESCROW_ADDRESS: testWallets.checkoutEscrow.address },
      'chain-indexer': { CHECKOUT_ESCROW_ADDRESS: testWallets.checkoutEscrow.address },
      'escrow-ledger': { CHECKOUT_ESCROW_ADDRESS: testWallets.checkoutEscrow.address },
    },
  });
  servicesStarted
    .then((all) =>
      Object.assign(
        upstreams,
        Object.fromEntries(Object.entries(all.services).map(([name, s]) => [name, s.url])),
      ),
    )
    .catch(() => undefined); // awaited by the second half
});

afterAll(async () => {
  edge?.closeAllConnections();
  if (edge) await new Promise((r) => edge!.close(r));
  await (await servicesStarted?.catch(() => undefined))?.stop();
  await consumerPackagesInstalled?.catch(() => undefined);
  for (const { dir } of SDKS) rmSync(path.join(ROOT, dir, OUT_DIR_NAME), { recursive: true, force: true });
  rmSync(WORK, { recursive: true, force: true });
});

let consumersChecked: Promise<string> | undefined;

/**
 * One consumer folder with every built package installed (linked) under its name, and each package's consumer code
 * as CommonJS and ESM, type-checked by one tsgo run against the bundled .d.ts files and their dependencies' own types
 * (skipLibCheck off). Answers the folder, for the probes that import the packages by name.
 */
function typeCheckedConsumers(): Promise<string> {
  consumersChecked ??= (async () => {
    const consumerDir = path.join(WORK, 'typed-consumer');
    const files: string[] = [];
    for (const sdk of SDKS) {
      const { outDir } = await buildAndPack(sdk.dir);
      const { name } = JSON.parse(readFileSync(path.join(outDir, 'package.json'), 'utf8')) as {
        name: string;
      };
      const installed = path.join(consumerDir, 'node_modules', ...name.split('/'));
      mkdirSync(path.dirname(installed), { recursive: true });
      symlinkSync(outDir, installed, 'dir');
      const base = path.basename(sdk.dir);
      for (const extension of ['cts', 'mts']) {
        writeFileSync(path.join(consumerDir, `${base}.${extension}`), sdk.consumer);
        files.push(`${base}.${extension}`);
      }
    }
    writeFileSync(
      path.join(consumerDir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          lib: ['es2022', 'dom'],
          types: ['node'],
          typeRoots: [path.join(ROOT, 'node_modules/@types')],
          strict: true,
          noEmit: true,
          skipLibCheck: false,
        },
        files,
      }),
    );
    // tsgo, the native compiler make typecheck uses: the same check in a quarter of tsc's CPU (18 s in a run).
    await run(path.join(ROOT, 'node_modules/.bin/tsgo'), ['-p', consumerDir], {
      cwd: consumerDir,
      timeout: 180_000,
    }).catch((error: { stdout?: string }) => {
      throw new Error(`a consumer's type check failed:\n${error.stdout ?? error}`);
    });
    return consumerDir;
  })();
  return consumersChecked;
}

describe('SDK packages build to publishable JavaScript with types', () => {
  it.concurrent.each(SDKS)('$dir builds, and the built JS runs in plain Node with its .d.ts', async (sdk) => {
    const packageDir = path.join(ROOT, sdk.dir);
    const { outDir } = await buildAndPack(sdk.dir);
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.NODE_OPTIONS;

    for (const file of ['index.js', 'index.mjs', 'index.d.ts', 'package.json']) {
      expect(existsSync(path.join(outDir, file))).toBe(true);
      // Private workspace packages are inlined: nothing a consumer could not install is imported.
      expect(readFileSync(path.join(outDir, file), 'utf8')).not.toMatch(
        /from ['"]@paygate\/|require\(['"]@paygate\//,
      );
    }
    const sourceExports = Object.keys(sdk.load()).sort();
    const types = readFileSync(path.join(outDir, 'index.d.ts'), 'utf8');
    for (const name of sourceExports) expect(types).toMatch(new RegExp(`\\b${name}\\b`));

    // A plain node process, CommonJS and ESM: the same exports as the source, and a call that works.
    const probe = (
      loader: string,
    ) => `(async () => { const m = ${loader}; const out = { keys: Object.keys(m).filter((k) => k !== 'default' && k !== 'module.exports').sort() };
      ${sdk.smoke} console.log(JSON.stringify(out)); })().catch((e) => { console.error(e); process.exit(1); });`;
    for (const loader of [
      `require(${JSON.stringify(path.join(outDir, 'index.js'))})`,
      `await import(${JSON.stringify(path.join(outDir, 'index.mjs'))})`,
    ]) {
      const { stdout } = await run(process.execPath, ['-e', probe(loader)], {
        cwd: outDir,
        env,
        timeout: 30_000,
      });
      expect(JSON.parse(stdout)).toEqual({ keys: sourceExports, smoke: sdk.expected });
    }

    // A consumer that installed the package: imported by its name (through the published exports map) from
    // CommonJS and ESM, and type-checked against the bundled .d.ts, which must be real types, not `any`.
    const manifest = JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8'));
    const consumerDir = await typeCheckedConsumers();
    for (const loader of [
      `require(${JSON.stringify(manifest.name)})`,
      `await import(${JSON.stringify(manifest.name)})`,
    ]) {
      const { stdout } = await run(process.execPath, ['-e', probe(loader)], {
        cwd: consumerDir,
        env,
        timeout: 30_000,
      });
      expect(JSON.parse(stdout)).toEqual({ keys: sourceExports, smoke: sdk.expected });
    }

    // What npm publishes (publishConfig.directory): the build, with a manifest pointing at it and no private deps.
    expect(manifest.private).toBeUndefined();
    expect(manifest.publishConfig).toMatchObject({ directory: 'dist', linkDirectory: false });
    const published = JSON.parse(readFileSync(path.join(outDir, 'package.json'), 'utf8'));
    expect(published).toMatchObject({
      name: manifest.name,
      version: manifest.version,
      main: './index.js',
      types: './index.d.ts',
      exports: { '.': { types: './index.d.ts', import: './index.mjs', require: './index.js' } },
    });
    expect(Object.keys(published.dependencies).filter((name) => name.startsWith('@paygate/'))).toEqual([]);
  });
});

const PUBLIC_SDKS = SDKS.map((sdk) => sdk.dir);

describe('the packed tarballs install with plain npm outside the workspace, and each makes a paid call', () => {
  const app = APP;
  const packed: Record<string, Packed> = {};
  let all: AllServices;
  let upstream: http.Server;
  let browser: Browser | undefined;
  let seller: { apiKey: string; publishableKey: string };
  const children: Array<import('node:child_process').ChildProcess> = [];

  beforeAll(async () => {
    for (const dir of PUBLIC_SDKS) packed[dir] = (await buildAndPack(dir)).packed;
    console.log(
      `packed SDK tarballs: ${PUBLIC_SDKS.map((dir) => `${path.basename(packed[dir]!.tarball)} ${packed[dir]!.size} B`).join(', ')}`,
    );
    // The folder outside the workspace: plain npm, the registry, the tarballs, and the consumer's own packages.
    await tarballsInstalled;
    all = await servicesStarted!;
    upstream = await new Promise((resolve) => {
      const server = http.createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ quote: 'Installed from a tarball.' }));
      });
      server.listen(0, '127.0.0.1', () => resolve(server));
    });
    seller = await signUpSeller(baseUrl, Wallet.createRandom());
    await createActiveSkill(baseUrl, seller.apiKey, {
      name: 'sdk-quotes',
      type: 'API',
      apiBaseUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      endpoints: [{ path: '/quote', method: 'GET', priceUsdc: '0.05', description: 'A quote' }],
    });
  }, 600_000);

  afterAll(async () => {
    for (const child of children) child.kill();
    await browser?.close().catch(() => undefined);
    if (upstream) await new Promise((r) => upstream.close(r));
  });

  /** A script run by plain node in the consumer folder; its last stdout line is its JSON answer. */
  async function runConsumer(
    file: string,
    code: string,
    args: string[] = [],
  ): Promise<Record<string, unknown>> {
    writeFileSync(path.join(app, file), code);
    const { stdout } = await run(process.execPath, [file, ...args], {
      cwd: app,
      env: consumerEnv(),
      timeout: 120_000,
    });
    return JSON.parse(stdout.trim().split('\n').at(-1)!);
  }

  const AGENT = `const { createAgent } = require('@paygate/agent-client');
    const { JsonRpcProvider, Wallet } = require('ethers');
    const [url, rpcUrl, key] = process.argv.slice(2);
    const agent = createAgent({ wallet: new Wallet(key, new JsonRpcProvider(rpcUrl)), maxPricePerCall: '0.10' });
    agent.fetch(url).then(async (res) => {
      console.log(JSON.stringify({ status: res.status, body: await res.json(), spent: agent.spent }));
      process.exit(0);
    }, (error) => { console.error(error); process.exit(1); });`;

  it('ships compiled JavaScript, types, every subpath, README, LICENSE and CHANGELOG, with npm ranges only', async () => {
    for (const dir of PUBLIC_SDKS) {
      const { files, size } = packed[dir]!;
      expect(files).toEqual(
        expect.arrayContaining([
          'LICENSE',
          'README.md',
          'CHANGELOG.md',
          'index.js',
          'index.mjs',
          'index.d.ts',
          'package.json',
        ]),
      );
      expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
      expect(size).toBeLessThan(200_000);
      const manifest = JSON.parse(readFileSync(path.join(ROOT, dir, 'package.json'), 'utf8'));
      const installedDir = path.join(app, 'node_modules', ...manifest.name.split('/'));
      const installed = JSON.parse(readFileSync(path.join(installedDir, 'package.json'), 'utf8'));
      expect(installed).toMatchObject({ name: manifest.name, version: manifest.version, license: 'MIT' });
      expect(JSON.stringify(installed)).not.toContain('workspace:');
      expect(readFileSync(path.join(installedDir, 'LICENSE'), 'utf8')).toContain('MIT License');
      // What the widget needs at run time is qrcode and ethers, never its build tool.
      expect(Object.keys(installed.dependencies ?? {})).not.toContain('esbuild');
    }
    expect(packed['libs/agent-client']!.files).toEqual(
      expect.arrayContaining(['refunds.js', 'refunds.mjs', 'refunds.d.ts']),
    );
    expect(packed['libs/checkout-widget']!.files).toEqual(
      expect.arrayContaining(['paygate-checkout.js', 'paygate-checkout.mjs']),
    );
    // Only the three public packages: the private workspace libraries are inlined.
    expect(readdirSync(path.join(app, 'node_modules/@paygate')).sort()).toEqual([
      'agent-client',
      'checkout-widget',
      'gateway-middleware',
      'mcp-paywall',
    ]);
    expect(existsSync(path.join(app, 'node_modules/esbuild'))).toBe(false);
    // The documented subpath, from CommonJS and ESM.
    const subpath = await runConsumer(
      'subpath.mjs',
      `import { refundRequestMessage } from '@paygate/agent-client/refunds';
       const { signRefundRequest } = await import('@paygate/agent-client/refunds');
       const cjs = (await import('node:module')).createRequire(import.meta.url)('@paygate/agent-client/refunds');
       console.log(JSON.stringify({ esm: typeof refundRequestMessage, dynamic: typeof signRefundRequest, cjs: typeof cjs.refundRequestMessage }));`,
    );
    expect(subpath).toEqual({ esm: 'function', dynamic: 'function', cjs: 'function' });
  });

  it('@paygate/agent-client pays a Paygate skill from a plain node process', async () => {
    const answer = await runConsumer('agent.cjs', AGENT, [
      `${baseUrl}/api/v1/skills/sdk-quotes/quote`,
      all.anvil.rpcUrl,
      testWallets.buyer.privateKey,
    ]);
    expect(answer).toEqual({ status: 200, body: { quote: 'Installed from a tarball.' }, spent: '0.05' });
  });

  it('@paygate/gateway-middleware sells a call on a seller server, paid with Paygate’s proof and with @x402/fetch', async () => {
    writeFileSync(
      path.join(app, 'seller.cjs'),
      `const express = require('express');
       const { createGateway } = require('@paygate/gateway-middleware');
       const gateway = createGateway({ apiKey: process.env.SELLER_KEY, apiBaseUrl: process.env.PAYGATE });
       const app = express();
       app.get('/forecast', gateway.payPerCall('0.05'), (req, res) => res.json({ forecast: 'sunny', paid: req.x402 }));
       const server = app.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })));`,
    );
    const child = (await import('node:child_process')).spawn(process.execPath, ['seller.cjs'], {
      cwd: app,
      env: { ...consumerEnv(), SELLER_KEY: seller.apiKey, PAYGATE: baseUrl, NODE_ENV: 'production' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    const port = await new Promise<number>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`the seller server exited (${code})`)));
      child.stdout!.once('data', (chunk: Buffer) => resolve(JSON.parse(chunk.toString()).port));
    });
    const url = `http://127.0.0.1:${port}/forecast`;
    // Paygate's facilitator settles once settlement's relayer has reported itself (its signer is listed).
    await waitFor(
      async () => {
        const r = await fetch(`${baseUrl}/api/v1/x402/supported`, {
          headers: { authorization: `Bearer ${seller.apiKey}` },
        });
        const body = (await r.json()) as { signers?: Record<string, string[]> };
        return (body.signers?.['eip155:*'] ?? []).length > 0;
      },
      { timeoutMs: 30_000, message: "Paygate's facilitator never listed a relayer" },
    );

    const byProof = await runConsumer('agent.cjs', AGENT, [
      url,
      all.anvil.rpcUrl,
      testWallets.buyer.privateKey,
    ]);
    expect(byProof).toMatchObject({
      status: 200,
      body: { forecast: 'sunny', paid: { amount: '0.05', payer: testWallets.buyer.address } },
    });

    const pay = wrapFetchWithPaymentFromConfig(fetch, {
      schemes: [
        {
          network: 'eip155:31337',
          client: new ExactEvmScheme(privateKeyToAccount(testWallets.buyer.privateKey as `0x${string}`)),
        },
      ],
      spendControls: {
        allowedAssets: [{ network: 'eip155:31337', asset: all.usdcAddress, maxAmountPerPayment: '100000' }],
      },
    });
    const byX402 = await pay(url);
    expect(byX402.status).toBe(200);
    expect(decodePaymentResponseHeader(byX402.headers.get('payment-response')!)).toMatchObject({
      success: true,
      payer: testWallets.buyer.address,
    });
  });

  it('@paygate/mcp-paywall prices a tool of an MCP server, and @paygate/agent-client pays it (real MCP SDK)', async () => {
    const answer = await runConsumer(
      'mcp.mjs',
      `import { createAgent } from '@paygate/agent-client';
       import { createPaywall } from '@paygate/mcp-paywall';
       import { Client } from '@modelcontextprotocol/sdk/client/index.js';
       import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
       import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
       import { JsonRpcProvider, Wallet } from 'ethers';
       const [paygate, rpcUrl, key, apiKey] = process.argv.slice(2);
       const paid = createPaywall({ apiKey, apiBaseUrl: paygate });
       const server = new McpServer({ name: 'seller', version: '1.0.0' });
       server.tool('quote', 'A quote', paid({ tool: 'quote', price: '0.05' }, async () => ({ content: [{ type: 'text', text: 'tarball' }] })));
       const [a, b] = InMemoryTransport.createLinkedPair();
       await server.connect(b);
       const client = new Client({ name: 'agent', version: '1.0.0' });
       await client.connect(a);
       const unpaid = await client.callTool({ name: 'quote' });
       const agent = createAgent({ wallet: new Wallet(key, new JsonRpcProvider(rpcUrl)), maxPricePerCall: '0.10' });
       const result = await agent.callTool(client, { name: 'quote' });
       console.log(JSON.stringify({ unpaid: unpaid.isError, text: result.content[0].text,
         settled: result._meta['x402/payment-response'].success, spent: agent.spent }));
       process.exit(0);`,
      [baseUrl, all.anvil.rpcUrl, testWallets.buyer.privateKey, seller.apiKey],
    );
    expect(answer).toEqual({ unpaid: true, text: 'tarball', settled: true, spent: '0.05' });
  });

  it('@paygate/checkout-widget (its script bundle) takes a checkout payment in Chromium', async () => {
    const widgetDir = path.join(app, 'node_modules/@paygate/checkout-widget');
    const page = `<!doctype html><html lang="en"><body><script type="module">
      import { createCheckout } from './paygate-checkout.mjs';
      window.checkout = createCheckout({ publishableKey: ${JSON.stringify(seller.publishableKey)}, skill: 'sdk-quotes',
        baseUrl: ${JSON.stringify(baseUrl)}, webSocket: false, pollIntervalMs: 300,
        onSuccess: (result) => { window.paid = result; } });
      window.checkout.open();
    </script></body></html>`;
    const pages = await new Promise<http.Server>((resolve) => {
      const server = http.createServer((req, res) => {
        if (req.url === '/paygate-checkout.mjs') {
          res.writeHead(200, { 'content-type': 'text/javascript' });
          res.end(readFileSync(path.join(widgetDir, 'paygate-checkout.mjs')));
          return;
        }
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end(page);
      });
      server.listen(0, '127.0.0.1', () => resolve(server));
    });
    try {
      browser = await chromium.launch(CHROMIUM_LAUNCH_OPTIONS);
      const tab = await browser.newPage();
      await tab.goto(`http://127.0.0.1:${(pages.address() as AddressInfo).port}/`);
      const session = await waitFor(
        async () =>
          (await tab.evaluate(
            () =>
              (
                window as unknown as {
                  checkout: { session?: { exactAmount: string; walletAddress: string; matching: string } };
                }
              ).checkout?.session,
          )) ?? undefined,
        { timeoutMs: 20_000, message: 'the widget never opened a checkout session' },
      );
      // The default matching: the price plus a unique sub-cent suffix, paid to the one checkout wallet.
      expect(session).toMatchObject({
        matching: 'amount',
        walletAddress: testWallets.checkoutEscrow.address,
      });
      expect(parseUsdc(session.exactAmount) - parseUsdc('0.05')).toBeGreaterThan(0n);
      expect(parseUsdc(session.exactAmount) - parseUsdc('0.05')).toBeLessThan(10_000n);
      const buyer = new Wallet(testWallets.buyer.privateKey, all.anvil.provider);
      const usdc = new Contract(all.usdcAddress, usdcAbi, buyer);
      await minedReceipt(
        await usdc.getFunction('transfer')(session.walletAddress, parseUsdc(session.exactAmount)),
      );
      const result = await waitFor(
        async () =>
          (await tab.evaluate(
            () => (window as unknown as { paid?: { amount: string; txHash: string } }).paid,
          )) ?? undefined,
        { timeoutMs: 30_000, message: 'the widget never reported the payment' },
      );
      expect(result.amount).toBe(session.exactAmount);
      expect(result.txHash).toMatch(/^0x[0-9a-f]{64}$/i);
    } finally {
      pages.closeAllConnections();
      await new Promise((r) => pages.close(r));
    }
  });
});
