/**
 * The chaos run starts its replicas from compiled JavaScript: `node --import tsx` compiles every TypeScript file
 * of a service on each start (about 1.6 s of CPU per start, measured on the 2-core machine: 1.5–1.9 s user for
 * the gateway or settlement against 0.2 s for the bundle), and a run starts 9–14 replicas and restarts the ones
 * it kills. Each service's main is bundled once per run with esbuild, as deploy/scripts/build-dist.ts does for
 * the images (workspace packages inlined, third-party packages required from pnpm's hoisted set through
 * NODE_PATH), into `services/<name>/dist/chaos/main.js`: its own file, so a build-dist running at the same time
 * (the Dockerfile test) never reads a half-written one, and the service's `sql/` is still found above it.
 *
 * The browser bundles (checkout widget, seller dashboard) stay built on demand at run time as under tsx: their
 * modules read their sources relative to `__dirname`, which the plugin below pins to the source directory.
 */
import { readFileSync, renameSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { build, type Plugin } from 'esbuild';

const ROOT = path.join(__dirname, '../..');

/** pnpm's hoisted packages: what library code bundled into a service requires (the Dockerfile sets the same). */
export const CHAOS_NODE_PATH = path.join(ROOT, 'node_modules/.pnpm/node_modules');

export function chaosEntry(service: string): string {
  return path.join(ROOT, `services/${service}/dist/chaos/main.js`);
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

/** Bundles each service's main (in parallel); returns the ms it took. */
export async function buildChaosServices(services: readonly string[]): Promise<number> {
  const started = Date.now();
  await Promise.all(
    services.map(async (service) => {
      const outfile = chaosEntry(service);
      const result = await build({
        entryPoints: [path.join(ROOT, `services/${service}/src/main.ts`)],
        bundle: true,
        platform: 'node',
        target: 'node20',
        format: 'cjs',
        write: false,
        plugins: [sourceDirname, externalPackages],
        logLevel: 'warning',
      });
      await mkdir(path.dirname(outfile), { recursive: true });
      // Written beside, then renamed: a replica of an earlier run starting now never reads half a file.
      const partial = `${outfile}.${process.pid}.tmp`;
      await writeFile(partial, result.outputFiles[0]!.contents);
      renameSync(partial, outfile);
    }),
  );
  return Date.now() - started;
}
