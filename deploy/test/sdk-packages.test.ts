import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

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
];

jest.setTimeout(240_000);

describe('SDK packages build to publishable JavaScript with types', () => {
  const outDirs: string[] = [];
  afterAll(() => {
    for (const dir of outDirs) rmSync(dir, { recursive: true, force: true });
  });

  it.concurrent.each(SDKS)('$dir builds, and the built JS runs in plain Node with its .d.ts', async (sdk) => {
    const packageDir = path.join(ROOT, sdk.dir);
    // Inside the package so the built code resolves the package's own npm dependencies (ethers, qrcode…).
    const outDir = mkdtempSync(path.join(packageDir, '.sdk-build-'));
    outDirs.push(outDir);
    const env: NodeJS.ProcessEnv = { ...process.env, SDK_OUT_DIR: path.basename(outDir) };
    delete env.NODE_OPTIONS;
    await run('pnpm', ['run', '--silent', 'build'], { cwd: packageDir, env, timeout: 200_000 });

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
    const consumerDir = path.join(outDir, 'consumer');
    const installed = path.join(consumerDir, 'node_modules', ...manifest.name.split('/'));
    mkdirSync(path.dirname(installed), { recursive: true });
    symlinkSync(outDir, installed, 'dir');
    writeFileSync(path.join(consumerDir, 'consumer.cts'), sdk.consumer);
    writeFileSync(path.join(consumerDir, 'consumer.mts'), sdk.consumer);
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
        files: ['consumer.cts', 'consumer.mts'],
      }),
    );
    await run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', consumerDir], {
      cwd: consumerDir,
      timeout: 120_000,
    }).catch((error: { stdout?: string }) => {
      throw new Error(`a consumer's type check failed:\n${error.stdout ?? error}`);
    });
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
