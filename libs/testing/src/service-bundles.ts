/**
 * Services started as processes run an esbuild bundle of their main (0.2 s of CPU per start, tsx: 1.5 s),
 * rebuilt only when `inputs.json` beside it no longer matches the build or a file's SHA-256.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, renameSync, statSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { build, version as esbuildVersion, type Plugin } from 'esbuild';
import { type ServiceProcess, spawnNodeProcess } from './processes';

const REPO_ROOT = path.join(__dirname, '../../..');

type BundlePurpose = 'dev' | 'chaos' | 'test';

function serviceBundlePath(service: string, purpose: BundlePurpose): string {
  return path.join(REPO_ROOT, `services/${service}/dist/${purpose}/main.js`);
}

const externalPackages: Plugin = {
  name: 'external-packages',
  setup(pluginBuild) {
    pluginBuild.onResolve({ filter: /^[^./]/ }, (args) =>
      args.path.startsWith('@paygate/') ? undefined : { path: args.path, external: true },
    );
  },
};

/** The browser bundles are still built at run time from their sources: their `__dirname` stays the source folder. */
const sourceDirname: Plugin = {
  name: 'source-dirname',
  setup(pluginBuild) {
    pluginBuild.onLoad({ filter: /libs\/(seller-dashboard|checkout-widget)\/src\/[^/]+\.ts$/ }, (args) => ({
      loader: 'ts',
      contents: readFileSync(args.path, 'utf8').replaceAll(
        '__dirname',
        JSON.stringify(path.dirname(args.path)),
      ),
      resolveDir: path.dirname(args.path),
    }));
  },
};

const BUILD_KEY = createHash('sha256')
  .update(`${esbuildVersion}\0${REPO_ROOT}\0`)
  .update(readFileSync(__filename))
  .digest('hex');

/** How it was built, and the SHA-256 of each file it was built from (by path in the repository). */
interface BundleInputs {
  build: string;
  inputs: Record<string, string>;
}

function inputsPath(service: string, purpose: BundlePurpose): string {
  return path.join(path.dirname(serviceBundlePath(service, purpose)), 'inputs.json');
}

function sha256(file: string): string | undefined {
  try {
    return createHash('sha256')
      .update(readFileSync(path.join(REPO_ROOT, file)))
      .digest('hex');
  } catch {
    return undefined;
  }
}

/** The bundle on disk was built by this build from files that are all unchanged. */
async function bundleIsCurrent(service: string, purpose: BundlePurpose): Promise<boolean> {
  const bundle = serviceBundlePath(service, purpose);
  if (!existsSync(bundle) || !existsSync(`${bundle}.map`)) return false;
  const recorded = await readFile(inputsPath(service, purpose), 'utf8')
    .then((text) => JSON.parse(text) as BundleInputs)
    .catch(() => undefined);
  if (recorded?.build !== BUILD_KEY) return false;
  return Object.entries(recorded.inputs).every(([file, hash]) => sha256(file) === hash);
}

/** A build's inputs, with the package.json and tsconfig.json steering resolution; undefined if one changed since. */
function inputsOf(metafileInputs: Record<string, unknown>, startedMs: number): BundleInputs | undefined {
  const files = new Set<string>(['tsconfig.base.json', 'tsconfig.json', 'package.json']);
  for (const input of Object.keys(metafileInputs)) {
    const file = path.relative(REPO_ROOT, path.resolve(input));
    files.add(file);
    const [parent, name] = file.split(path.sep);
    if ((parent === 'libs' || parent === 'services') && name) {
      for (const config of ['package.json', 'tsconfig.json']) {
        if (existsSync(path.join(REPO_ROOT, parent, name, config)))
          files.add(path.join(parent, name, config));
      }
    }
  }
  const inputs: Record<string, string> = {};
  for (const file of [...files].sort()) {
    const absolute = path.join(REPO_ROOT, file);
    if (!existsSync(absolute) || statSync(absolute).mtimeMs >= startedMs) return undefined;
    const hash = sha256(file);
    if (!hash) return undefined;
    inputs[file] = hash;
  }
  return { build: BUILD_KEY, inputs };
}

/** Writes a file beside, then renames it: a process of an earlier run starting now never reads half a file. */
async function writeWhole(file: string, contents: string | Uint8Array): Promise<void> {
  const partial = `${file}.${process.pid}.tmp`;
  await writeFile(partial, contents);
  renameSync(partial, file);
}

/** Bundles each service's main (in parallel, with a source map) unless its bundle is current; returns the ms. */
export async function buildServiceBundles(
  services: readonly string[],
  purpose: BundlePurpose,
): Promise<number> {
  const started = Date.now();
  await Promise.all(
    services.map(async (service) => {
      if (await bundleIsCurrent(service, purpose)) return;
      const outfile = serviceBundlePath(service, purpose);
      // A millisecond earlier than the build reads anything: a file saved during the build is never recorded.
      const buildStarted = Date.now() - 1;
      const result = await build({
        entryPoints: [path.join(REPO_ROOT, `services/${service}/src/main.ts`)],
        outfile,
        bundle: true,
        platform: 'node',
        target: 'node20',
        format: 'cjs',
        sourcemap: 'linked',
        write: false,
        metafile: true,
        plugins: [sourceDirname, externalPackages],
        logLevel: 'warning',
      });
      await mkdir(path.dirname(outfile), { recursive: true });
      await rm(inputsPath(service, purpose), { force: true });
      // The map first, then the bundle, then the record of its inputs (a bundle without one is built again).
      const isMap = (file: { path: string }) => Number(file.path.endsWith('.map'));
      const outputs = [...result.outputFiles].sort((a, b) => isMap(b) - isMap(a));
      for (const output of outputs) await writeWhole(output.path, output.contents);
      const inputs = inputsOf(result.metafile.inputs, buildStarted);
      if (inputs) await writeWhole(inputsPath(service, purpose), `${JSON.stringify(inputs, null, 1)}\n`);
    }),
  );
  return Date.now() - started;
}

/** Node's options and environment for running a bundle built above (NODE_PATH: pnpm's hoisted packages). */
export function serviceBundleCommand(
  service: string,
  purpose: BundlePurpose,
): { args: string[]; env: NodeJS.ProcessEnv } {
  return {
    args: ['--enable-source-maps', serviceBundlePath(service, purpose)],
    env: { NODE_PATH: path.join(REPO_ROOT, 'node_modules/.pnpm/node_modules') },
  };
}

/** Runs a service's bundle (built with `buildServiceBundles`) as its own Node process. */
export function spawnServiceBundle(
  service: string,
  purpose: BundlePurpose,
  env: NodeJS.ProcessEnv,
): ServiceProcess {
  const command = serviceBundleCommand(service, purpose);
  return spawnNodeProcess(command.args, { ...env, ...command.env });
}
