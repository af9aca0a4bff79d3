/**
 * Builds an SDK package (agent-client, gateway-middleware, checkout-widget) for npm, run as its `build` script
 * from the package folder: `<out>/index.mjs` (ESM) and `<out>/index.js` (CommonJS) with Paygate's private
 * workspace libraries (`@paygate/*`) inlined, one bundled `<out>/index.d.ts`, the README, and the
 * `<out>/package.json` that is published (`publishConfig.directory`): the package's own fields, its npm
 * dependencies without the inlined `@paygate/*` ones, and main/module/types/exports pointing at the build.
 * Inside the workspace the package keeps being used from `src/`.
 *   SDK_OUT_DIR: the output folder, relative to the package (default `dist`).
 *   --platform=browser: for code that runs in pages (checkout-widget); node otherwise.
 *   --export=./file.js: a further file of the build published as a subpath (the widget's script-tag bundle).
 */
import { copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { generateDtsBundle } from 'dts-bundle-generator';
import { build } from 'tsup';

const INLINED = /^@paygate\//;

async function main(): Promise<void> {
  const packageDir = process.cwd();
  const outDir = path.resolve(packageDir, process.env.SDK_OUT_DIR ?? 'dist');
  const platform = process.argv.includes('--platform=browser') ? 'browser' : 'node';
  const extraExports = process.argv.filter((arg) => arg.startsWith('--export=')).map((arg) => arg.slice(9));
  const manifest = JSON.parse(await readFile(path.join(packageDir, 'package.json'), 'utf8'));
  const entry = path.join(packageDir, 'src/index.ts');
  const npmDependencies = Object.fromEntries(
    Object.entries<string>(manifest.dependencies ?? {}).filter(([name]) => !INLINED.test(name)),
  );

  await rm(outDir, { recursive: true, force: true });
  await mkdir(outDir, { recursive: true });
  await build({
    entry: { index: entry },
    outDir,
    format: ['esm', 'cjs'],
    platform,
    target: platform === 'browser' ? 'es2020' : 'node20',
    noExternal: [INLINED],
    external: Object.keys(npmDependencies),
    config: false,
    silent: true,
  });
  const [types] = generateDtsBundle(
    [
      {
        filePath: entry,
        libraries: {
          inlinedLibraries: Object.keys(manifest.dependencies ?? {}).filter((n) => INLINED.test(n)),
        },
      },
    ],
    { preferredConfigPath: path.join(__dirname, '../../tsconfig.sdk.json') },
  );
  await writeFile(path.join(outDir, 'index.d.ts'), types ?? '');
  await copyFile(path.join(packageDir, 'README.md'), path.join(outDir, 'README.md'));

  const published = {
    name: manifest.name,
    version: manifest.version,
    description: manifest.description,
    ...(manifest.license ? { license: manifest.license } : {}),
    main: './index.js',
    module: './index.mjs',
    types: './index.d.ts',
    exports: {
      '.': { types: './index.d.ts', import: './index.mjs', require: './index.js' },
      ...Object.fromEntries(extraExports.map((file) => [file, file])),
    },
    ...(manifest.sideEffects !== undefined ? { sideEffects: manifest.sideEffects } : {}),
    dependencies: npmDependencies,
  };
  await writeFile(path.join(outDir, 'package.json'), `${JSON.stringify(published, null, 2)}\n`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
