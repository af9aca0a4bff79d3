/**
 * jest loads every module again into each suite's registry, resolving and compiling each file of a package one by
 * one (about 0.7 ms of CPU a file): kysely is 262 files, typebox 200, ethers 126, express and its dependencies 69,
 * supertest's 119, and nearly every suite loads them. Each is bundled here once into a single file (esbuild) and
 * jest maps the package's name to it. The code is the packages' own, unchanged; only the number of files a suite
 * resolves and compiles falls.
 *
 * Two kinds. `OWN_FILES`: the package's own files only (its `#` imports included); each dependency stays a separate require of the very file
 * the package itself resolves, by absolute path, so a dependency shared with other code is still one module.
 * `WHOLE`: the package with its dependencies inlined, for packages whose dependencies nothing else in the workspace
 * imports (a second copy of express's `qs` or pg's `pg-types` splits nothing); the names listed beside each stay
 * bare requires, so they resolve through the mapping to their own bundle (or, optional and absent, fail at run time
 * as before).
 *
 * Only packages imported by their bare name are bundled: a subpath import loads a second copy of the package's
 * files beside the bundle, so a class it checks with instanceof would be two classes. ajv is left out for that
 * reason (ajv-formats requires `ajv/dist/compile/codegen`), and so are viem and zod. The one subpath left is
 * typebox's `/value` (the gateway's x402 protocol): TypeBox tells a schema's kind by global symbols
 * (`Symbol.for`), not by class, so its copy and the bundle agree. Packages installed in two versions (jose) are
 * left out too: the name would map every importer to one of them. pino is left out: it finds its worker files
 * next to its own.
 */
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const { isBuiltin } = require('node:module');
const path = require('node:path');

const OWN_FILES = [
  'kysely',
  '@sinclair/typebox',
  'ethers',
  'nats',
  'undici',
  '@opentelemetry/api',
  '@opentelemetry/core',
];
const WHOLE = {
  express: [],
  supertest: [],
  pg: ['pg-native'],
  'prom-client': ['@opentelemetry/api'],
  siwe: ['ethers'],
  envalid: [],
};
const WORKSPACE_PACKAGES = ['libs', 'services']
  .flatMap((parent) =>
    fs.readdirSync(path.join(__dirname, parent)).map((name) => path.join(__dirname, parent, name)),
  )
  .concat(__dirname);

/** A workspace package that depends on `name`: where the workspace's own code resolves it from. */
function dependentOf(name) {
  const dir = WORKSPACE_PACKAGES.find((candidate) => {
    const manifest = path.join(candidate, 'package.json');
    if (!fs.existsSync(manifest)) return false;
    const { dependencies = {}, devDependencies = {} } = JSON.parse(fs.readFileSync(manifest, 'utf8'));
    return name in dependencies || name in devDependencies;
  });
  if (!dir) throw new Error(`no workspace package depends on ${name}`);
  return dir;
}
const OUT_DIR = path.join(__dirname, 'node_modules/.cache/paygate-jest-bundles');

/**
 * Every bare import but the package's own files: external, as the absolute file the importing file resolves, or by
 * its bare name when that file is the one another bundle holds (so it maps to that bundle, one copy in the suite).
 */
const dependenciesAsResolved = (bundledEntries) => ({
  name: 'dependencies-as-resolved',
  setup(build) {
    build.onResolve({ filter: /^[^./#]/ }, (args) => {
      if (args.kind === 'entry-point') return undefined;
      if (isBuiltin(args.path) || args.path.startsWith('node:')) return { path: args.path, external: true };
      try {
        const file = require.resolve(args.path, { paths: [args.resolveDir] });
        return { path: bundledEntries.get(args.path) === file ? args.path : file, external: true };
      } catch {
        // An optional dependency that is not installed: required by name, it fails at run time as it did before.
        return { path: args.path, external: true };
      }
    });
  },
});

/** Inlines every dependency but the builtins and the names given, which stay bare requires. */
function inlinedExcept(names) {
  return {
    name: 'inlined-except',
    setup(build) {
      build.onResolve({ filter: /^[^./#]/ }, (args) => {
        if (isBuiltin(args.path) || args.path.startsWith('node:')) return { path: args.path, external: true };
        const bare = args.path.startsWith('@')
          ? args.path.split('/').slice(0, 2).join('/')
          : args.path.split('/')[0];
        return names.includes(bare) ? { path: args.path, external: true } : undefined;
      });
    },
  };
}

function packageVersion(entry, name) {
  let dir = path.dirname(entry);
  while (dir !== path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (fs.existsSync(manifest)) {
      const parsed = JSON.parse(fs.readFileSync(manifest, 'utf8'));
      if (parsed.name === name) return parsed.version;
    }
    dir = path.dirname(dir);
  }
  throw new Error(`no package.json of ${name} above ${entry}`);
}

/** The moduleNameMapper entries: each bundled package's bare name to its bundle, built when missing. */
async function bundledPackageMappings() {
  if (process.env.JEST_BUNDLE_PACKAGES === '0') return {};
  const esbuild = require(require.resolve('esbuild', { paths: [dependentOf('esbuild')] }));
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const mappings = {};
  // A bundle is built again when the lockfile (a whole bundle holds its dependencies' code) or this file changes.
  const inputs = createHash('sha256')
    .update(fs.readFileSync(path.join(__dirname, 'pnpm-lock.yaml')))
    .update(fs.readFileSync(__filename))
    .digest('hex');
  const entries = new Map(
    [...OWN_FILES, ...Object.keys(WHOLE)].map((name) => [
      name,
      require.resolve(name, { paths: [dependentOf(name)] }),
    ]),
  );
  const ownFiles = dependenciesAsResolved(entries);
  const bundles = OWN_FILES.map((name) => ({ name, plugin: ownFiles, kind: 'own' })).concat(
    Object.entries(WHOLE).map(([name, bare]) => ({ name, plugin: inlinedExcept(bare), kind: 'whole' })),
  );
  for (const { name, plugin, kind } of bundles) {
    const entry = entries.get(name);
    // The bundle names its dependencies by absolute path: it belongs to this checkout's node_modules only.
    const where = createHash('sha256').update(`${entry}\0${inputs}`).digest('hex').slice(0, 12);
    const outfile = path.join(
      OUT_DIR,
      `${name.replace('/', '+')}@${packageVersion(entry, name)}-${kind}-${where}.cjs`,
    );
    if (!fs.existsSync(outfile)) {
      // Written under a temporary name and renamed: two jest runs starting together never read half a file.
      const draft = `${outfile}.${process.pid}.tmp`;
      await esbuild.build({
        entryPoints: [entry],
        bundle: true,
        plugins: [plugin],
        platform: 'node',
        format: 'cjs',
        target: 'node20',
        outfile: draft,
        logLevel: 'error',
      });
      fs.renameSync(draft, outfile);
    }
    mappings[`^${name.replace(/[/.]/g, '\\$&')}$`] = outfile;
  }
  return mappings;
}

module.exports = { bundledPackageMappings };
