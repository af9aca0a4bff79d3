/**
 * jest loads every module again into each suite's registry, resolving and compiling each file of a package one by
 * one: kysely is 262 files, typebox 200, ethers 126, nats 54, and nearly every suite loads all four. Each is
 * bundled here once into a single file (esbuild, the package's own files only; each dependency stays a separate
 * require of the very file the package itself resolves, by absolute path), and jest maps the package's name to it. The code is the package's own, unchanged; only the number of
 * files a suite resolves and compiles falls.
 *
 * Only packages imported by their bare name are bundled: a subpath import loads a second copy of the package's
 * files beside the bundle, so a class it checks with instanceof would be two classes. ajv is left out for that
 * reason (ajv-formats requires `ajv/dist/compile/codegen`), and so are viem and zod. The one subpath left is
 * typebox's `/value` (the gateway's x402 protocol): TypeBox tells a schema's kind by global symbols
 * (`Symbol.for`), not by class, so its copy and the bundle agree. Packages installed in two versions (jose) are
 * left out too: the name would map every importer to one of them.
 */
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const { isBuiltin } = require('node:module');
const path = require('node:path');

const BUNDLED_PACKAGES = ['kysely', '@sinclair/typebox', 'ethers', 'nats', 'undici'];
const WORKSPACE_PACKAGES = ['libs', 'services'].flatMap((parent) =>
  fs.readdirSync(path.join(__dirname, parent)).map((name) => path.join(__dirname, parent, name)),
);

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

/** Every bare import but the package's own files: external, as the absolute file the importing file resolves. */
const dependenciesAsResolved = {
  name: 'dependencies-as-resolved',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.kind === 'entry-point') return undefined;
      if (isBuiltin(args.path) || args.path.startsWith('node:')) return { path: args.path, external: true };
      try {
        return { path: require.resolve(args.path, { paths: [args.resolveDir] }), external: true };
      } catch {
        // An optional dependency that is not installed: required by name, it fails at run time as it did before.
        return { path: args.path, external: true };
      }
    });
  },
};

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
  for (const name of BUNDLED_PACKAGES) {
    const entry = require.resolve(name, { paths: [dependentOf(name)] });
    // The bundle names its dependencies by absolute path: it belongs to this checkout's node_modules only.
    const where = createHash('sha256').update(entry).digest('hex').slice(0, 12);
    const outfile = path.join(
      OUT_DIR,
      `${name.replace('/', '+')}@${packageVersion(entry, name)}-${where}.cjs`,
    );
    if (!fs.existsSync(outfile)) {
      // Written under a temporary name and renamed: two jest runs starting together never read half a file.
      const draft = `${outfile}.${process.pid}.tmp`;
      await esbuild.build({
        entryPoints: [entry],
        bundle: true,
        plugins: [dependenciesAsResolved],
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
