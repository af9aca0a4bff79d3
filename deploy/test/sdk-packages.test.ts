import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = path.join(__dirname, '../..');

/**
 * The SDKs sellers and agents install from npm: each builds (`pnpm run build`) to plain JavaScript (ESM and
 * CommonJS) with one bundled .d.ts and its own package.json, the private workspace libraries (money, chain…)
 * inlined, and that output runs in a plain Node process (no tsx) exporting exactly what the source package exports.
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
  },
  {
    dir: 'libs/gateway-middleware',
    load: () => require('@paygate/gateway-middleware'),
    smoke: `const signature = m.signWebhook({ secret: 's', payload: '{}', timestamp: 1 });
      out.smoke = signature.startsWith('t=1,v1=') ? 'signed' : signature;`,
    expected: 'signed',
  },
  {
    dir: 'libs/checkout-widget',
    load: () => require('@paygate/checkout-widget'),
    smoke: 'out.smoke = m.formatUsdcExact(1234567n);',
    expected: '1.234567',
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

    // What npm publishes (publishConfig.directory): the build, with a manifest pointing at it and no private deps.
    const manifest = JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8'));
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
