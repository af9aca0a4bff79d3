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

const packageDirs = ['libs', 'services']
  .flatMap((parent) => fs.readdirSync(path.join(__dirname, parent)).map((name) => `${parent}/${name}`))
  .concat('deploy')
  .filter((dir) => fs.existsSync(path.join(__dirname, dir, 'test')))
  .sort();

module.exports = {
  projects: packageDirs.map((dir) => ({
    displayName: dir,
    rootDir: path.join(__dirname, dir),
    testEnvironment: path.join(__dirname, 'jest.environment.js'),
    testMatch: ['<rootDir>/test/**/*.test.ts'],
    testPathIgnorePatterns: ['/node_modules/'],
    transform,
  })),
  testSequencer: path.join(__dirname, 'jest.sequencer.js'),
  testTimeout: 60000,
  // Three workers on two cores: many suites wait on the chain, timers or child processes, and a third worker keeps
  // the CPUs busy meanwhile (a clean-clone make test took 6 min 22 s instead of about 7.5).
  maxWorkers: 3,
};
