/**
 * jest's node environment, plus one thing: a bigint can be sent from a worker to the runner. A failed assertion on a
 * bigint (`expect(balance).toBe(6n)`) is reported through JSON, which throws on bigints, and the run showed "Do not
 * know how to serialize a BigInt" instead of the failure. Only this realm (the worker's, which serializes results)
 * gets `BigInt.prototype.toJSON`; tests run in their own vm context, whose BigInt is untouched, so code under test
 * still cannot put a bigint into JSON by accident.
 */
const { TestEnvironment } = require('jest-environment-node');

if (!Object.hasOwn(BigInt.prototype, 'toJSON')) {
  Object.defineProperty(BigInt.prototype, 'toJSON', {
    value() {
      return `${this}n`;
    },
  });
}

module.exports = TestEnvironment;
