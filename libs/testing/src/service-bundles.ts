/**
 * Services started as processes (`make dev`, the chaos run, the crash tests) run a bundle of their main, not
 * TypeScript through tsx: `node --import tsx` compiles and resolves every file of a service on each start (about
 * 1.5 s of CPU for the gateway or settlement on the 2-core machine, against 0.2 s for the bundle), and `make dev`
 * starts seven of them, the chaos run up to fourteen with restarts. Each main is bundled with esbuild, as
 * deploy/scripts/build-dist.ts does for the images: workspace packages inlined, third-party packages required
 * from pnpm's hoisted set through NODE_PATH. Each purpose gets its own file (`services/<name>/dist/<purpose>/`),
 * so runs of different purposes never share one, and the service's `sql/` is still found above it.
 *
 * A bundle is built again only when one of its inputs changed: beside it, `inputs.json` holds a SHA-256 of every
 * file it was built from (esbuild's metafile, with each package's package.json and tsconfig.json, which steer
 * resolution) and of the build itself (this file, esbuild's version), so the second `make dev` in a row, or a
 * rerun of a test, starts the services without spending a second of CPU on seven bundles it already has.
 *
 * The browser bundles (checkout widget, seller dashboard) stay built on demand at run time as under tsx: their
 * modules read their sources relative to `__dirname`, which a plugin below pins to the source directory.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, renameSync, statSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { build, version as esbuildVersion, type Plugin } from 'esbuild';
import { type ServiceProcess, spawnNodeProcess } from './processes';

const REPO_ROOT = path.join(__dirname, '../../..');

/** pnpm's hoisted packages: what library code bundled into a service requires (the Dockerfile sets the same). */
const SERVICE_BUNDLE_NODE_PATH = path.join(REPO_ROOT, 'node_modules/.pnpm/node_modules');

/** Who runs the bundle: each has its own output file. */
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

/** Modules that find files next to their source keep finding them: `__dirname` is their source directory. */
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

/** What every bundle's build depends on besides its inputs: how it is built. */
const BUILD_KEY = createHash('sha256')
  .update(`${esbuildVersion}\0${REPO_ROOT}\0`)
  .update(readFileSync(__filename))
  .digest('hex');

/** The files a bundle was built from, by path relative to the repository, and their SHA-256. */
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
  let recorded: BundleInputs;
  try {
    recorded = JSON.parse(await readFile(inputsPath(service, purpose), 'utf8')) as BundleInputs;
  } catch {
    return false;
  }
  if (recorded.build !== BUILD_KEY) return false;
  return Object.entries(recorded.inputs).every(([file, hash]) => sha256(file) === hash);
}

/**
 * The inputs of a build that started at `startedMs`, from esbuild's metafile (paths relative to the working
 * directory); undefined when one of them changed since the build started or is not a file (no record: the next
 * run builds again).
 */
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

/**
 * Bundles each service's main (in parallel) unless its bundle is current, with a source map beside it; returns
 * the ms it took.
 */
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

/** Node's options and environment for running a bundle built above. */
export function serviceBundleCommand(
  service: string,
  purpose: BundlePurpose,
): { args: string[]; env: NodeJS.ProcessEnv } {
  return {
    args: ['--enable-source-maps', serviceBundlePath(service, purpose)],
    env: { NODE_PATH: SERVICE_BUNDLE_NODE_PATH },
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
