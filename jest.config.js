/**
 * One jest project per workspace package (each keeps its suites in its own test/ folder), so a run can be
 * narrowed to one package: `jest --selectProjects services/checkout`. Unit tests (no Postgres, NATS, chain or
 * browser) are named `*.unit.test.ts`; `make check` runs only those.
 */
const fs = require('node:fs');
const path = require('node:path');

const transform = {
  '^.+\\.(t|j)sx?$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
};

const { bundledPackageMappings } = require('./jest.bundles');
const { WORKERS } = require('./jest.workers');

/**
 * Chaos runs have their own targets (`make test` keeps every kind of test, the chaos seeds go to `make chaos`
 * and `make chaos-short`, which sets PAYGATE_CHAOS_TESTS=1). Faults still run in `make test`: killed NATS
 * servers, crashed services, reorgs, Postgres outages, each in its own suite.
 */
const ignoredSuites = ['/node_modules/'].concat(
  process.env.PAYGATE_CHAOS_TESTS === '1' ? [] : ['/deploy/test/chaos-short\\.test\\.ts$'],
);

const packageDirs = ['libs', 'services']
  .flatMap((parent) => fs.readdirSync(path.join(__dirname, parent)).map((name) => `${parent}/${name}`))
  .concat('deploy')
  .filter((dir) => fs.existsSync(path.join(__dirname, dir, 'test')))
  .sort();

module.exports = async () => {
  const moduleNameMapper = await bundledPackageMappings();
  return {
    projects: packageDirs.map((dir) => ({
      displayName: dir,
      rootDir: path.join(__dirname, dir),
      testEnvironment: path.join(__dirname, 'jest.environment.js'),
      testMatch: ['<rootDir>/test/**/*.test.ts'],
      testPathIgnorePatterns: ignoredSuites,
      transform,
      moduleNameMapper,
    })),
    testSequencer: path.join(__dirname, 'jest.sequencer.js'),
    testTimeout: 60000,
    // jest.workers.js: four on two cores, two of them at most in a whole-system suite.
    maxWorkers: WORKERS,
    // A worker's heap grew from about 150 MB to 800 MB over its suites (jest --logHeapUsage: each suite's module
    // registry is not all given back), and garbage collection took a growing share of its CPU (16% of a serial run's,
    // four times as much per minute at the end as at the start). A worker above this is replaced by a fresh one.
    workerIdleMemoryLimit: '512MB',
  };
};
