/**
 * Services started as processes (`make dev`, the chaos run, the crash tests) run a bundle of their main, not
 * TypeScript through tsx: `node --import tsx` compiles and resolves every file of a service on each start (about
 * 1.5 s of CPU for the gateway or settlement on the 2-core machine, against 0.2 s for the bundle), and `make dev`
 * starts seven of them, the chaos run up to fourteen with restarts. Each main is bundled with esbuild, as
 * deploy/scripts/build-dist.ts does for the images: workspace packages inlined, third-party packages required
 * from pnpm's hoisted set through NODE_PATH. Each purpose gets its own file (`services/<name>/dist/<purpose>/`),
 * so runs of different purposes never share one, and the service's `sql/` is still found above it.
 *
 * The browser bundles (checkout widget, seller dashboard) stay built on demand at run time as under tsx: their
 * modules read their sources relative to `__dirname`, which a plugin below pins to the source directory.
 */
import { readFileSync, renameSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { build, type Plugin } from 'esbuild';
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

/** Bundles each service's main (in parallel), with a source map beside it; returns the ms it took. */
export async function buildServiceBundles(
  services: readonly string[],
  purpose: BundlePurpose,
): Promise<number> {
  const started = Date.now();
  await Promise.all(
    services.map(async (service) => {
      const outfile = serviceBundlePath(service, purpose);
      const result = await build({
        entryPoints: [path.join(REPO_ROOT, `services/${service}/src/main.ts`)],
        outfile,
        bundle: true,
        platform: 'node',
        target: 'node20',
        format: 'cjs',
        sourcemap: 'linked',
        write: false,
        plugins: [sourceDirname, externalPackages],
        logLevel: 'warning',
      });
      await mkdir(path.dirname(outfile), { recursive: true });
      // Each file is written beside, then renamed (the map first): a process of an earlier run starting now
      // never reads half a file.
      const isMap = (file: { path: string }) => Number(file.path.endsWith('.map'));
      const outputs = [...result.outputFiles].sort((a, b) => isMap(b) - isMap(a));
      for (const output of outputs) {
        const partial = `${output.path}.${process.pid}.tmp`;
        await writeFile(partial, output.contents);
        renameSync(partial, output.path);
      }
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
