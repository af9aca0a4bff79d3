/**
 * Compiles what the images run to plain JavaScript (the Dockerfile's build stage runs this; so can anyone):
 *
 *   pnpm exec tsx deploy/scripts/build-dist.ts [outputs…]
 *
 * Each entry below becomes one CommonJS file with the workspace packages (@paygate/*) bundled in and every
 * other package left to `require` from the production node_modules of the services and libs (NODE_PATH=node_modules/.pnpm/node_modules, pnpm's
 * hoisted set, since library code bundled into a service imports its libraries' dependencies). The browser
 * bundles (checkout widget, seller dashboard) are built here too and embedded, so nothing compiles TypeScript
 * or runs esbuild at run time.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { buildWidgetBundle } from '@paygate/checkout-widget/bundle';
import { buildDashboard } from '@paygate/seller-dashboard';
import { build, type Plugin } from 'esbuild';
import routeTable from '../routes.json';

const ROOT = path.join(__dirname, '../..');

export interface DistEntry {
  /** Source, relative to the repository root. */
  source: string;
  /** Output, relative to the repository root. */
  output: string;
  /** Bundle its third-party packages too (the edge: its imports are not in the image's node_modules). */
  bundleDependencies?: boolean;
}

/** Every service's main, the edge, and the local chain (its output sits three levels below the root, like its source). */
export const DIST_ENTRIES: readonly DistEntry[] = [
  ...Object.keys(routeTable.services).map((service) => ({
    source: `services/${service}/src/main.ts`,
    output: `services/${service}/dist/main.js`,
  })),
  { source: 'deploy/dev/edge.ts', output: 'deploy/dist/edge/edge.js', bundleDependencies: true },
  // libs/testing finds deploy/build/TestUSDC.json at __dirname/../../../: three levels, like its source.
  { source: 'deploy/scripts/start-local-chain.ts', output: 'deploy/dist/chain/start-local-chain.js' },
];

/** Third-party packages stay external (required at run time); only the workspace's own code is bundled. */
const externalPackages: Plugin = {
  name: 'external-packages',
  setup(pluginBuild) {
    pluginBuild.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith('@paygate/')) return undefined;
      return { path: args.path, external: true };
    });
  },
};

const DASHBOARD_SOURCE = path.join(ROOT, 'libs/seller-dashboard/src/index.ts');

/**
 * The browser bundles the services build in memory at run time with esbuild (the checkout widget, the seller
 * dashboard) are built now and embedded, and esbuild itself is replaced by a stub that fails loudly: the image
 * has no esbuild, so a new run-time use must be prebuilt here too.
 */
async function prebuiltBrowserBundles(): Promise<Plugin> {
  const widget = { iife: await buildWidgetBundle('iife'), esm: await buildWidgetBundle('esm') };
  const dashboard = await buildDashboard();
  return {
    name: 'prebuilt-browser-bundles',
    setup(pluginBuild) {
      pluginBuild.onResolve({ filter: /^@paygate\/checkout-widget\/bundle$/ }, () => ({
        path: 'checkout-widget',
        namespace: 'prebuilt',
      }));
      pluginBuild.onResolve({ filter: /^@paygate\/seller-dashboard$/ }, () => ({
        path: 'seller-dashboard',
        namespace: 'prebuilt',
      }));
      pluginBuild.onResolve({ filter: /^esbuild$/ }, () => ({ path: 'esbuild', namespace: 'prebuilt' }));
      pluginBuild.onLoad({ filter: /^checkout-widget$/, namespace: 'prebuilt' }, () => ({
        loader: 'js',
        contents: `const bundles = ${JSON.stringify(widget)};
export async function buildWidgetBundle(format) {
  const bundle = bundles[format];
  if (bundle === undefined) throw new Error('unknown widget format ' + format);
  return bundle;
}`,
      }));
      // The dashboard module's other exports (page, CSP) stay; its own buildDashboard is shadowed.
      pluginBuild.onLoad({ filter: /^seller-dashboard$/, namespace: 'prebuilt' }, () => ({
        loader: 'js',
        resolveDir: path.dirname(DASHBOARD_SOURCE),
        contents: `export * from ${JSON.stringify(DASHBOARD_SOURCE)};
const assets = ${JSON.stringify(dashboard)};
export async function buildDashboard() {
  return assets;
}`,
      }));
      pluginBuild.onLoad({ filter: /^esbuild$/, namespace: 'prebuilt' }, () => ({
        loader: 'js',
        contents: `export function build() {
  throw new Error('esbuild is not in the image: prebuild this bundle in deploy/scripts/build-dist.ts');
}`,
      }));
    },
  };
}

export async function buildDist(only?: readonly string[]): Promise<string[]> {
  const entries = only?.length ? DIST_ENTRIES.filter((e) => only.includes(e.output)) : DIST_ENTRIES;
  const prebuilt = await prebuiltBrowserBundles();
  const built: string[] = [];
  for (const entry of entries) {
    const outfile = path.join(ROOT, entry.output);
    mkdirSync(path.dirname(outfile), { recursive: true });
    await build({
      entryPoints: [path.join(ROOT, entry.source)],
      outfile,
      bundle: true,
      platform: 'node',
      target: 'node20',
      format: 'cjs',
      sourcemap: true,
      // Stack traces point into the TypeScript sources.
      sourcesContent: false,
      plugins: entry.bundleDependencies ? [prebuilt] : [prebuilt, externalPackages],
      logLevel: 'warning',
    });
    built.push(entry.output);
  }
  return built;
}

if (require.main === module) {
  buildDist(process.argv.slice(2)).then(
    (built) => console.log(`built ${built.join(', ')}`),
    (error) => {
      console.error((error as Error).message);
      process.exit(1);
    },
  );
}
