/**
 * jest loads every module again into each suite's registry, resolving and compiling each file of a package one by
 * one: viem is 344 files, kysely 262, typebox 200, ethers 126, and a gateway suite loads about 1,500 files before its
 * first test. Each installed copy of the packages below is bundled here once into a single file (esbuild, the
 * package's own files only; each other package stays a separate require of the very file the package itself
 * resolves), and jest's resolver (jest.resolver.js) answers a file of that copy with the bundle's module for it.
 * The code is the package's own, unchanged; only the number of files a suite resolves and compiles falls.
 *
 * Every entry of a copy (its `exports` map as `require` resolves it, or its `main`, plus EXTRA_ENTRIES) comes from
 * the same bundle, so `viem` and `viem/accounts` share one copy of viem's internals and a class checked with
 * instanceof is one class. A file of a bundled copy that is not one of its entries, asked for from outside the
 * copy, is refused loudly (it would load a second copy of the package beside the bundle): add it to
 * EXTRA_ENTRIES. A copy is bundled the first time a suite resolves one of its files (a child process, so that
 * jest's synchronous resolver can wait for esbuild), under node_modules/.cache, and kept for later runs.
 */
const { execFileSync } = require('node:child_process');
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const { isBuiltin } = require('node:module');
const path = require('node:path');

const BUNDLED_PACKAGES = new Set([
  'kysely',
  '@sinclair/typebox',
  'ethers',
  'nats',
  'undici',
  'viem',
  'ox',
  'abitype',
  'ajv',
  'jose',
  'yaml',
  'prom-client',
  '@opentelemetry/api',
  '@opentelemetry/core',
  'zod-to-json-schema',
  '@noble/hashes',
  '@noble/curves',
]);
/** Files other packages require by path that the package's exports or main do not name (ajv-formats's, x402's). */
const EXTRA_ENTRIES = { ajv: ['dist/compile/codegen/index.js', 'dist/2020.js'] };
/** The conditions jest resolves a CommonJS require with, in the order an exports map is read. */
const REQUIRE_CONDITIONS = new Set(['require', 'node', 'node-addons', 'default']);
const OUT_DIR = path.join(__dirname, 'node_modules/.cache/paygate-jest-bundles');
/** A file inside an installed copy: its store folder, its package name (scoped or not), the file within. */
const STORE_FILE = /^(.*\/node_modules\/\.pnpm\/[^/]+\/node_modules\/((?:@[^/]+\/)?[^/]+))\/(.+)$/;

/** The file an exports target names for a CommonJS require (the first matching condition, in the map's order). */
function requireTarget(target) {
  if (typeof target === 'string') return target;
  if (Array.isArray(target)) {
    for (const candidate of target) {
      const picked = requireTarget(candidate);
      if (picked) return picked;
    }
    return undefined;
  }
  if (target && typeof target === 'object') {
    for (const [condition, value] of Object.entries(target)) {
      if (REQUIRE_CONDITIONS.has(condition)) {
        const picked = requireTarget(value);
        if (picked) return picked;
      }
    }
  }
  return undefined;
}

/** The files of a copy a require can reach by the package's name, relative to its folder. */
function entriesOf(copyDir, name) {
  const manifest = JSON.parse(fs.readFileSync(path.join(copyDir, 'package.json'), 'utf8'));
  const entries = new Set(EXTRA_ENTRIES[name] ?? []);
  const { exports } = manifest;
  if (exports) {
    const map =
      typeof exports === 'object' &&
      !Array.isArray(exports) &&
      Object.keys(exports).some((k) => k.startsWith('.'))
        ? exports
        : { '.': exports };
    for (const [subpath, target] of Object.entries(map)) {
      if (subpath.includes('*') || subpath === './package.json') continue;
      const file = requireTarget(target);
      if (file && /\.(c?js|json)$/.test(file)) entries.add(path.normalize(file));
    }
  } else {
    entries.add(path.relative(copyDir, require.resolve(copyDir)));
  }
  return [...entries].filter((file) => fs.existsSync(path.join(copyDir, file)));
}

/** Every bare import but the copy's own files: external, as the absolute file the importing file resolves. */
function dependenciesAsResolved(copyDir) {
  return {
    name: 'dependencies-as-resolved',
    setup(build) {
      build.onResolve({ filter: /^[^./]/ }, (args) => {
        // The copy's own files, and its subpath imports (`#platform`), which esbuild reads from its package.json.
        if (args.kind === 'entry-point' || args.path.startsWith(copyDir) || args.path.startsWith('#'))
          return undefined;
        if (isBuiltin(args.path) || args.path.startsWith('node:')) return { path: args.path, external: true };
        try {
          const file = require.resolve(args.path, { paths: [args.resolveDir] });
          return file.startsWith(`${copyDir}/`) ? { path: file } : { path: file, external: true };
        } catch {
          // An optional dependency that is not installed: required by name, it fails at run time as it did before.
          return { path: args.path, external: true };
        }
      });
    },
  };
}

function bundleDirOf(copyDir, name) {
  const version = JSON.parse(fs.readFileSync(path.join(copyDir, 'package.json'), 'utf8')).version;
  const where = createHash('sha256').update(copyDir).digest('hex').slice(0, 12);
  return path.join(OUT_DIR, `${name.replace('/', '+')}@${version}-${where}`);
}

/**
 * Builds a copy's bundle (run as `node jest.bundles.js <copyDir> <name>`): `bundle.cjs` maps each entry to a
 * function that loads it (lazily: esbuild runs a module's body on its first require), one shim per entry, and
 * `entries.json`. Written to a temporary folder and renamed: suites bundling the same copy at once never read half.
 */
async function buildCopy(copyDir, name) {
  const esbuild = require(require.resolve('esbuild', { paths: [path.join(__dirname, 'libs/testing')] }));
  const entries = entriesOf(copyDir, name);
  const outDir = bundleDirOf(copyDir, name);
  const draft = `${outDir}.${process.pid}.tmp`;
  fs.rmSync(draft, { recursive: true, force: true });
  fs.mkdirSync(draft, { recursive: true });
  const loaders = entries.map(
    (file) => `${JSON.stringify(file)}: () => require(${JSON.stringify(path.join(copyDir, file))}),`,
  );
  await esbuild.build({
    stdin: {
      contents: `module.exports = {\n${loaders.join('\n')}\n};\n`,
      resolveDir: copyDir,
      sourcefile: 'entries.cjs',
    },
    bundle: true,
    plugins: [dependenciesAsResolved(copyDir)],
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    outfile: path.join(draft, 'bundle.cjs'),
    logLevel: 'error',
  });
  const shims = {};
  entries.forEach((file, index) => {
    const shim = `entry-${index}.cjs`;
    fs.writeFileSync(
      path.join(draft, shim),
      `module.exports = require('./bundle.cjs')[${JSON.stringify(file)}]();\n`,
    );
    shims[file] = shim;
  });
  fs.writeFileSync(path.join(draft, 'entries.json'), JSON.stringify(shims));
  try {
    fs.renameSync(draft, outDir);
  } catch {
    fs.rmSync(draft, { recursive: true, force: true }); // another suite finished the same bundle first
  }
}

const copies = new Map();

/** The copy's entries, built on first use: relative file to shim path. */
function copyEntries(copyDir, name) {
  let entries = copies.get(copyDir);
  if (entries) return entries;
  const outDir = bundleDirOf(copyDir, name);
  const manifest = path.join(outDir, 'entries.json');
  if (!fs.existsSync(manifest)) {
    execFileSync(process.execPath, [__filename, copyDir, name], { stdio: 'inherit', timeout: 120_000 });
  }
  const shims = JSON.parse(fs.readFileSync(manifest, 'utf8'));
  entries = new Map(Object.entries(shims).map(([file, shim]) => [file, path.join(outDir, shim)]));
  copies.set(copyDir, entries);
  return entries;
}

/**
 * What jest should load for `file` (a resolved real path) required from `basedir`: the bundle's shim when the file
 * belongs to a bundled copy, else the file itself.
 */
function bundledFile(file, basedir) {
  if (process.env.JEST_BUNDLE_PACKAGES === '0' || !file.includes('/node_modules/.pnpm/')) return file;
  const match = STORE_FILE.exec(file);
  if (!match || !BUNDLED_PACKAGES.has(match[2])) return file;
  const [, copyDir, name, inside] = match;
  const shim = copyEntries(copyDir, name).get(inside);
  if (shim) return shim;
  if (basedir.startsWith(`${copyDir}/`)) return file;
  throw new Error(
    `${file} is a file of ${name}, which jest loads from one bundle (jest.bundles.js), but not one of its entries: add it to EXTRA_ENTRIES`,
  );
}

if (require.main === module) {
  const [copyDir, name] = process.argv.slice(2);
  buildCopy(copyDir, name).catch((error) => {
    console.error(error);
    process.exit(1);
  });
}

module.exports = { bundledFile };
