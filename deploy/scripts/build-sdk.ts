/**
 * Builds an SDK package (agent-client, gateway-middleware, checkout-widget) for npm, run as its `build` script
 * from the package folder: `<out>/index.mjs` (ESM) and `<out>/index.js` (CommonJS) with Paygate's private
 * workspace libraries (`@paygate/*`) inlined, one bundled `<out>/index.d.ts`, the same for every published
 * subpath, README, LICENSE and CHANGELOG, and the `<out>/package.json` that is published
 * (`publishConfig.directory`): the package's own fields, main/module/types/exports pointing at the build, and
 * exactly the npm packages the built code imports as `dependencies` (versions from the package's or the inlined
 * libraries' manifests; a build that imports something nobody declares fails), those only its types import as
 * optional `peerDependencies`. Inside the workspace the package keeps being used from `src/`.
 *   SDK_OUT_DIR: the output folder, relative to the package (default `dist`).
 *   --platform=browser: for code that runs in pages (checkout-widget); node otherwise.
 *   --subpath=./refunds: a further entry of the package's `exports` map published as that subpath.
 *   --export=./file.js: a further file of the build published as a subpath (the widget's script-tag bundle).
 *   --pack=<dir>: no build; `npm pack` the output folder into <dir> (SDK_PACK_DIR overrides it) after checking
 *     every exported file is there, and print `{ tarball, size, unpackedSize, files }` as JSON.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { generateDtsBundle } from 'dts-bundle-generator';
import { build } from 'tsup';

const INLINED = /^@paygate\//;
const ROOT = path.join(__dirname, '../..');

interface Manifest {
  name: string;
  version: string;
  description?: string;
  license?: string;
  sideEffects?: unknown;
  exports?: Record<string, string>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

const readManifest = async (dir: string): Promise<Manifest> =>
  JSON.parse(await readFile(path.join(dir, 'package.json'), 'utf8'));

/** `@paygate/name` → its folder in the workspace (libs/ or services/). */
function workspaceDir(name: string): string {
  const short = name.replace(INLINED, '');
  for (const parent of ['libs', 'services']) {
    const dir = path.join(ROOT, parent, short);
    if (existsSync(path.join(dir, 'package.json'))) return dir;
  }
  throw new Error(`workspace package ${name} not found under libs/ or services/`);
}

/**
 * Every npm version range the package could need: its own dependencies (first), then those of each inlined
 * workspace library, transitively, then dev dependencies (for types only).
 */
async function knownRanges(
  manifest: Manifest,
): Promise<{ runtime: Map<string, string>; types: Map<string, string> }> {
  const runtime = new Map<string, string>();
  const seen = new Set<string>();
  const visit = async (m: Manifest) => {
    for (const [name, range] of Object.entries(m.dependencies ?? {})) {
      if (!INLINED.test(name)) {
        if (!runtime.has(name)) runtime.set(name, range);
      } else if (!seen.has(name)) {
        seen.add(name);
        await visit(await readManifest(workspaceDir(name)));
      }
    }
  };
  await visit(manifest);
  // A declared peer range wins for types (express: 4 or 5), then the dev dependency's.
  const types = new Map(runtime);
  for (const [name, range] of Object.entries({ ...manifest.devDependencies, ...manifest.peerDependencies })) {
    if (!INLINED.test(name) && !runtime.has(name)) types.set(name, range);
  }
  return { runtime, types };
}

const BUILTIN = new Set(builtinModules);

/** A bare import specifier reduced to its npm package name; undefined for Node built-ins and relative paths. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:'))
    return undefined;
  const parts = specifier.split('/');
  if (BUILTIN.has(parts[0]!)) return undefined;
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/** The npm packages the built JavaScript imports, from esbuild's metafiles (then removed from the output). */
async function runtimeImports(outDir: string): Promise<Set<string>> {
  const names = new Set<string>();
  for (const file of await filesOf(outDir, /^metafile-.*\.json$/)) {
    const meta = JSON.parse(await readFile(file, 'utf8')) as {
      outputs: Record<string, { imports: Array<{ path: string; external?: boolean }> }>;
    };
    for (const output of Object.values(meta.outputs)) {
      for (const imported of output.imports) {
        const name = imported.external ? packageOf(imported.path) : undefined;
        if (name) names.add(name);
      }
    }
    await rm(file);
  }
  return names;
}

/** The npm packages a bundled .d.ts refers to (its import/export declarations and import() types). */
function typeImports(declarations: string): Set<string> {
  const names = new Set<string>();
  const specifiers = [
    ...declarations.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']/gm),
    ...declarations.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g),
  ];
  for (const [, specifier] of specifiers) {
    const name = specifier ? packageOf(specifier) : undefined;
    if (name) names.add(name);
  }
  return names;
}

async function filesOf(dir: string, pattern: RegExp): Promise<string[]> {
  return (await readdir(dir)).filter((file) => pattern.test(file)).map((file) => path.join(dir, file));
}

async function buildPackage(packageDir: string, outDir: string, argv: string[]): Promise<void> {
  const platform = argv.includes('--platform=browser') ? 'browser' : 'node';
  const extraExports = argv.filter((arg) => arg.startsWith('--export=')).map((arg) => arg.slice(9));
  const subpaths = argv.filter((arg) => arg.startsWith('--subpath=')).map((arg) => arg.slice(10));
  const manifest = await readManifest(packageDir);
  const entries: Array<{ subpath: string; name: string; file: string }> = [
    { subpath: '.', name: 'index', file: path.join(packageDir, 'src/index.ts') },
    ...subpaths.map((subpath) => {
      const source = manifest.exports?.[subpath];
      if (!source) throw new Error(`--subpath=${subpath}: not in ${manifest.name}'s exports map`);
      return { subpath, name: subpath.slice(2), file: path.join(packageDir, source) };
    }),
  ];
  const { runtime, types } = await knownRanges(manifest);

  await rm(outDir, { recursive: true, force: true });
  await mkdir(outDir, { recursive: true });
  await build({
    entry: Object.fromEntries(entries.map((e) => [e.name, e.file])),
    outDir,
    format: ['esm', 'cjs'],
    platform,
    target: platform === 'browser' ? 'es2020' : 'node20',
    noExternal: [INLINED],
    external: [...runtime.keys()],
    config: false,
    silent: true,
    metafile: true,
  });
  const declarations = generateDtsBundle(
    entries.map((e) => ({
      filePath: e.file,
      libraries: {
        inlinedLibraries: Object.keys(manifest.dependencies ?? {}).filter((n) => INLINED.test(n)),
      },
    })),
    { preferredConfigPath: path.join(__dirname, '../../tsconfig.sdk.json') },
  );
  for (const [i, entry] of entries.entries()) {
    await writeFile(path.join(outDir, `${entry.name}.d.ts`), declarations[i] ?? '');
  }
  for (const file of ['README.md', 'LICENSE']) {
    if (!existsSync(path.join(packageDir, file))) throw new Error(`${manifest.name} has no ${file}`);
    await copyFile(path.join(packageDir, file), path.join(outDir, file));
  }
  if (existsSync(path.join(packageDir, 'CHANGELOG.md'))) {
    await copyFile(path.join(packageDir, 'CHANGELOG.md'), path.join(outDir, 'CHANGELOG.md'));
  }

  const dependencies: Record<string, string> = {};
  for (const name of await runtimeImports(outDir)) {
    const range = runtime.get(name);
    if (!range) throw new Error(`the build imports ${name}, which no dependency declares`);
    dependencies[name] = range;
  }
  const peerDependencies: Record<string, string> = {};
  for (const file of await filesOf(outDir, /\.d\.ts$/)) {
    for (const name of typeImports(await readFile(file, 'utf8'))) {
      if (dependencies[name]) continue;
      const range = types.get(name);
      if (!range)
        throw new Error(`${path.basename(file)} refers to types of ${name}, which nothing declares`);
      peerDependencies[name] = range;
    }
  }
  for (const [name, range] of Object.entries({ ...dependencies, ...peerDependencies })) {
    if (range.startsWith('workspace:')) throw new Error(`${name} would be published as ${range}`);
  }

  const sorted = (record: Record<string, string>) => Object.fromEntries(Object.entries(record).sort());
  const published = {
    name: manifest.name,
    version: manifest.version,
    description: manifest.description,
    ...(manifest.license ? { license: manifest.license } : {}),
    engines: { node: '>=20' },
    main: './index.js',
    module: './index.mjs',
    types: './index.d.ts',
    exports: {
      ...Object.fromEntries(
        entries.map((e) => [
          e.subpath,
          { types: `./${e.name}.d.ts`, import: `./${e.name}.mjs`, require: `./${e.name}.js` },
        ]),
      ),
      ...Object.fromEntries(extraExports.map((file) => [file, file])),
      './package.json': './package.json',
    },
    ...(manifest.sideEffects !== undefined ? { sideEffects: manifest.sideEffects } : {}),
    dependencies: sorted(dependencies),
    ...(Object.keys(peerDependencies).length
      ? {
          peerDependencies: sorted(peerDependencies),
          peerDependenciesMeta: Object.fromEntries(
            Object.keys(peerDependencies)
              .sort()
              .map((name) => [name, { optional: true }]),
          ),
        }
      : {}),
  };
  await writeFile(path.join(outDir, 'package.json'), `${JSON.stringify(published, null, 2)}\n`);
}

/** `npm pack` of the built folder, once every file its exports map names is there. */
async function pack(outDir: string, destination: string): Promise<void> {
  const published = JSON.parse(await readFile(path.join(outDir, 'package.json'), 'utf8')) as {
    exports: Record<string, string | Record<string, string>>;
  };
  for (const target of Object.values(published.exports)) {
    for (const file of typeof target === 'string' ? [target] : Object.values(target)) {
      if (!existsSync(path.join(outDir, file))) throw new Error(`the exports map names ${file}, not built`);
    }
  }
  await mkdir(destination, { recursive: true });
  const { stdout } = await promisify(execFile)(
    'npm',
    ['pack', '--json', '--pack-destination', destination, '--ignore-scripts'],
    { cwd: outDir, timeout: 120_000 },
  );
  const [packed] = JSON.parse(stdout) as Array<{
    filename: string;
    size: number;
    unpackedSize: number;
    files: Array<{ path: string }>;
  }>;
  console.log(
    JSON.stringify({
      tarball: path.join(destination, packed!.filename),
      size: packed!.size,
      unpackedSize: packed!.unpackedSize,
      files: packed!.files.map((f) => f.path).sort(),
    }),
  );
}

async function main(): Promise<void> {
  const packageDir = process.cwd();
  const outDir = path.resolve(packageDir, process.env.SDK_OUT_DIR ?? 'dist');
  const packTo = process.argv.find((arg) => arg.startsWith('--pack='))?.slice(7);
  if (packTo) await pack(outDir, path.resolve(packageDir, process.env.SDK_PACK_DIR ?? packTo));
  else await buildPackage(packageDir, outDir, process.argv.slice(2));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
