/** One jest run for every workspace: each lib and service keeps its suites in its own test/ folder. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/libs', '<rootDir>/services', '<rootDir>/deploy'],
  testMatch: ['**/test/**/*.test.ts'],
  transform: {
    '^.+\\.(t|j)sx?$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  testTimeout: 60000,
  maxWorkers: 2,
};
