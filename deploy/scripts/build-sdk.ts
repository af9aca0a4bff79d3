/**
 * Builds SDK packages for npm: run as a package's `build` script from its folder, or with `--all` for every workspace
 * package whose manifest has a `paygateSdk` field (one TypeScript program then makes every package's declarations:
 * about half the time of one program per package). Each package gets `<out>/index.mjs` (ESM) and `<out>/index.js`
 * (CommonJS) with Paygate's private workspace libraries (`@paygate/*`) inlined, one bundled `<out>/index.d.ts`, the
 * same for every published subpath, README, LICENSE and CHANGELOG, and the `<out>/package.json` that is published
 * (`publishConfig.directory`): the package's own fields, main/module/types/exports pointing at the build, and
 * exactly the npm packages the built code imports as `dependencies` (versions from the package's or the inlined
 * libraries' manifests; a build that imports something nobody declares fails), those only its types import as
 * optional `peerDependencies`. Inside the workspace the package keeps being used from `src/`.
 *   SDK_OUT_DIR: the output folder, relative to the package (default `dist`).
 *   --pack=<dir>: no build; `npm pack` each output folder into <dir> (relative to the working directory;
 *     SDK_PACK_DIR overrides it) after checking every exported file is there, and print
 *     `{ name, tarball, size, unpackedSize, files }` as JSON, a line per package.
 *   --build with --pack: build first, then pack, in one process (a tsx start less).
 * The manifest's `paygateSdk` field says how to build the package (see SdkOptions).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { generateDtsBundle } from 'dts-bundle-generator';
import { build } from 'tsup';
import { parse as parseYaml } from 'yaml';

const INLINED = /^@paygate\//;
const ROOT = path.join(__dirname, '../..');

/** A package's `paygateSdk` field. */
interface SdkOptions {
  /** `browser` for code that runs in pages (checkout-widget); `node` otherwise. */
  platform?: 'node' | 'browser';
  /** Further entries of the package's `exports` map published as those subpaths (`./refunds`). */
  subpaths?: string[];
  /** Further files of the build published as subpaths (the widget's script-tag bundle). */
  files?: string[];
  /** A script of the package's (run with tsx, SDK_OUT_DIR set) that writes those files. */
  afterBuild?: string;
}

interface Manifest {
  name: string;
  paygateSdk?: SdkOptions;
  version: string;
  description?: string;
  license?: string;
  sideEffects?: unknown;
  exports?: Record<string, string>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

/** The workspace catalog (pnpm-workspace.yaml `catalog:`): one version range per shared dependency. */
let catalog: Record<string, string> | undefined;
async function catalogRange(name: string): Promise<string> {
  catalog ??=
    (
      parseYaml(await readFile(path.join(ROOT, 'pnpm-workspace.yaml'), 'utf8')) as {
        catalog?: Record<string, string>;
      }
    ).catalog ?? {};
  const range = catalog[name];
  if (!range) throw new Error(`${name} is "catalog:" but pnpm-workspace.yaml's catalog has no range for it`);
  return range;
}

/** A package.json with `catalog:` ranges replaced by the catalog's (an npm consumer needs a real range). */
async function readManifest(dir: string): Promise<Manifest> {
  const manifest = JSON.parse(await readFile(path.join(dir, 'package.json'), 'utf8')) as Manifest;
  for (const field of ['dependencies', 'devDependencies', 'peerDependencies'] as const) {
    for (const [name, range] of Object.entries(manifest[field] ?? {})) {
      if (range === 'catalog:') manifest[field]![name] = await catalogRange(name);
    }
  }
  return manifest;
}

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

interface Plan {
  packageDir: string;
  outDir: string;
  manifest: Manifest;
  options: SdkOptions;
  entries: Array<{ subpath: string; name: string; file: string }>;
  ranges: { runtime: Map<string, string>; types: Map<string, string> };
}

async function planFor(packageDir: string, outDirName: string): Promise<Plan> {
  const manifest = await readManifest(packageDir);
  const options = manifest.paygateSdk;
  if (!options) throw new Error(`${manifest.name} has no paygateSdk field: it is not published`);
  const entries = [
    { subpath: '.', name: 'index', file: path.join(packageDir, 'src/index.ts') },
    ...(options.subpaths ?? []).map((subpath) => {
      const source = manifest.exports?.[subpath];
      if (!source) throw new Error(`${manifest.name}: subpath ${subpath} is not in its exports map`);
      return { subpath, name: subpath.slice(2), file: path.join(packageDir, source) };
    }),
  ];
  const outDir = path.resolve(packageDir, outDirName);
  return { packageDir, outDir, manifest, options, entries, ranges: await knownRanges(manifest) };
}

/** JavaScript (esbuild, through tsup) of one package, and its `afterBuild` script started. */
async function buildJavaScript(plan: Plan): Promise<void> {
  const platform = plan.options.platform ?? 'node';
  await rm(plan.outDir, { recursive: true, force: true });
  await mkdir(plan.outDir, { recursive: true });
  await build({
    entry: Object.fromEntries(plan.entries.map((e) => [e.name, e.file])),
    outDir: plan.outDir,
    format: ['esm', 'cjs'],
    platform,
    target: platform === 'browser' ? 'es2020' : 'node20',
    noExternal: [INLINED],
    external: [...plan.ranges.runtime.keys()],
    config: false,
    silent: true,
    metafile: true,
  });
}

function runAfterBuild(plan: Plan): Promise<unknown> {
  if (!plan.options.afterBuild) return Promise.resolve();
  return promisify(execFile)(
    process.execPath,
    [require.resolve('tsx/cli'), path.join(plan.packageDir, plan.options.afterBuild)],
    {
      cwd: plan.packageDir,
      env: { ...process.env, SDK_OUT_DIR: path.relative(plan.packageDir, plan.outDir) },
      timeout: 120_000,
    },
  );
}

/** README, LICENSE, CHANGELOG and the published manifest, once the JavaScript and declarations are written. */
async function finish(plan: Plan): Promise<void> {
  const { packageDir, outDir, manifest, entries } = plan;
  const { runtime, types } = plan.ranges;
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
      ...Object.fromEntries((plan.options.files ?? []).map((file) => [file, file])),
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

/**
 * Every entry's declarations, emitted by tsgo (TypeScript's native compiler) in one program into a folder of the
 * workspace that mirrors it (`<ROOT>/.sdk-build-dts-<pid>/libs/…`), beside a tsconfig whose `@paygate/*` paths
 * name those declarations. Each mirrored package folder links the package's `node_modules`, so their imports
 * resolve to the same npm packages as the sources'. Answers the folder and, per entry, its declaration file.
 */
async function emitDeclarations(files: string[]): Promise<{ dir: string; config: string; dts: string[] }> {
  const dir = path.join(ROOT, `.sdk-build-dts-${process.pid}`);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const sdkConfig = path.join(ROOT, 'tsconfig.sdk.json');
  const emitConfig = path.join(dir, 'tsconfig.emit.json');
  await writeFile(
    emitConfig,
    JSON.stringify({
      extends: sdkConfig,
      compilerOptions: { rootDir: ROOT, outDir: dir, noEmit: false, emitDeclarationOnly: true },
      include: [],
      files,
    }),
  );
  try {
    await promisify(execFile)(path.join(ROOT, 'node_modules/.bin/tsgo'), ['-p', emitConfig], {
      cwd: ROOT,
      timeout: 240_000,
    });
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`the SDK declarations did not compile:\n${stdout ?? ''}${stderr ?? ''}`);
  }
  for (const parent of ['libs', 'services']) {
    if (!existsSync(path.join(dir, parent))) continue;
    for (const name of await readdir(path.join(dir, parent))) {
      const modules = path.join(ROOT, parent, name, 'node_modules');
      if (existsSync(modules)) await symlink(modules, path.join(dir, parent, name, 'node_modules'));
    }
  }
  const config = path.join(dir, 'tsconfig.bundle.json');
  await writeFile(
    config,
    JSON.stringify({
      extends: sdkConfig,
      compilerOptions: { paths: { '@paygate/*': ['./libs/*/src/index.d.ts'] } },
      include: [],
    }),
  );
  const dts = files.map((file) => path.join(dir, path.relative(ROOT, file)).replace(/\.ts$/, '.d.ts'));
  return { dir, config, dts };
}

/**
 * Builds the packages: JavaScript per package, then every entry's declarations (tsgo, emitDeclarations above),
 * bundled per entry by dts-bundle-generator from one TypeScript program. Given declarations, the bundler compiles
 * no source: with its own (tsc) emit of the sources, the declarations took 7.6 s of CPU; tsgo's emit takes 0.8 s
 * and the bundling 4.7 s, the same files.
 * dts-bundle-generator is patched in patches/: its check of which declarations an export uses searched the
 * graph again for every pair of symbol and export (7.5 of the 13 s of CPU this build took before); the patch walks
 * it once per symbol and writes the same files.
 */
async function buildPackages(packageDirs: string[], outDirName: string): Promise<void> {
  const plans = await Promise.all(packageDirs.map((dir) => planFor(dir, outDirName)));
  const entries = plans.flatMap((plan) => plan.entries.map((entry) => ({ plan, entry })));
  // The declarations are emitted from the sources beside the JavaScript builds (neither reads the other's output).
  const emitting = emitDeclarations(entries.map(({ entry }) => entry.file));
  emitting.catch(() => undefined); // awaited below, its failure reported there
  let afterBuilds: Promise<unknown>;
  try {
    for (const plan of plans) await buildJavaScript(plan);
    afterBuilds = Promise.all(plans.map(runAfterBuild));
    const emitted = await emitting;
    const declarations = generateDtsBundle(
      entries.map(({ plan }, index) => ({
        filePath: emitted.dts[index]!,
        libraries: {
          inlinedLibraries: Object.keys(plan.manifest.dependencies ?? {}).filter((n) => INLINED.test(n)),
        },
      })),
      { preferredConfigPath: emitted.config },
    );
    for (const [index, { plan, entry }] of entries.entries()) {
      await writeFile(path.join(plan.outDir, `${entry.name}.d.ts`), declarations[index] ?? '');
    }
  } finally {
    const emitted = await emitting.catch(() => undefined);
    if (emitted) await rm(emitted.dir, { recursive: true, force: true });
  }
  await afterBuilds;
  for (const plan of plans) await finish(plan);
}

/** Every workspace package that is published (has a `paygateSdk` field). */
async function publishedPackages(): Promise<string[]> {
  const dirs: string[] = [];
  for (const parent of ['libs', 'services']) {
    for (const name of (await readdir(path.join(ROOT, parent))).sort()) {
      const dir = path.join(ROOT, parent, name);
      if (existsSync(path.join(dir, 'package.json')) && (await readManifest(dir)).paygateSdk) dirs.push(dir);
    }
  }
  return dirs;
}

/** Every file the built folder's exports map names is there; answers the published package's name. */
async function checkExportsBuilt(outDir: string): Promise<string> {
  const published = JSON.parse(await readFile(path.join(outDir, 'package.json'), 'utf8')) as {
    name: string;
    exports: Record<string, string | Record<string, string>>;
  };
  for (const target of Object.values(published.exports)) {
    for (const file of typeof target === 'string' ? [target] : Object.values(target)) {
      if (!existsSync(path.join(outDir, file))) throw new Error(`the exports map names ${file}, not built`);
    }
  }
  return published.name;
}

/** `npm pack` of the built folders, in one npm process (an npm start is about 0.7 s of CPU). */
async function pack(outDirs: string[], destination: string): Promise<void> {
  const names = await Promise.all(outDirs.map(checkExportsBuilt));
  await mkdir(destination, { recursive: true });
  const { stdout } = await promisify(execFile)(
    'npm',
    ['pack', '--json', '--pack-destination', destination, '--ignore-scripts', ...outDirs],
    { cwd: destination, timeout: 120_000 },
  );
  const packed = JSON.parse(stdout) as Array<{
    name: string;
    filename: string;
    size: number;
    unpackedSize: number;
    files: Array<{ path: string }>;
  }>;
  for (const name of names) {
    const tarball = packed.find((p) => p.name === name);
    if (!tarball) throw new Error(`npm pack did not pack ${name}`);
    console.log(
      JSON.stringify({
        name,
        tarball: path.join(destination, tarball.filename),
        size: tarball.size,
        unpackedSize: tarball.unpackedSize,
        files: tarball.files.map((f) => f.path).sort(),
      }),
    );
  }
}

async function main(): Promise<void> {
  const outDirName = process.env.SDK_OUT_DIR ?? 'dist';
  const packageDirs = process.argv.includes('--all') ? await publishedPackages() : [process.cwd()];
  const packTo = process.argv.find((arg) => arg.startsWith('--pack='))?.slice(7);
  if (!packTo) return buildPackages(packageDirs, outDirName);
  if (process.argv.includes('--build')) await buildPackages(packageDirs, outDirName);
  await pack(
    packageDirs.map((dir) => path.resolve(dir, outDirName)),
    path.resolve(process.env.SDK_PACK_DIR ?? packTo),
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
