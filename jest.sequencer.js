/**
 * Orders the suites of a run. On a clean clone jest has no timings of its own and orders by file size, so a long
 * suite could start last and run alone at the end while the other workers sit idle. Suites jest has timed before
 * keep jest's own order (failed first, then slowest); the others follow this list, then file size.
 *
 * The list starts the long suites first, and alternates the ones that keep a core busy (chaos, fuzz, the dev
 * runner, the SDK builds) with long ones that mostly wait (a NATS outage of 26 s, blocks on a 1 s chain): three
 * suites that all want a core each on two cores ran each of them slower, while a waiting suite leaves its core to
 * the others.
 */
const Sequencer = require('@jest/test-sequencer').default;
const path = require('node:path');

const LONGEST_FIRST = [
  'deploy/test/fuzz.test.ts',
  'libs/bus/test/outage.test.ts',
  'deploy/test/dev-twice.test.ts',
  'services/settlement/test/relayer-heads.test.ts',
  'deploy/test/sdk-packages.test.ts',
  'deploy/test/dashboard.browser.test.ts',
  'services/escrow-ledger/test/money-e2e.test.ts',
  'services/settlement/test/crash.test.ts',
  'deploy/test/newcomer.test.ts',
  'deploy/test/x402-money.test.ts',
  'deploy/test/system.test.ts',
  'deploy/test/middleware-x402.test.ts',
  'deploy/test/mcp-paywall.test.ts',
  'services/chain-indexer/test/indexer.test.ts',
  'deploy/test/nats-authorization.test.ts',
  'services/settlement/test/e2e-ledger.test.ts',
  'libs/runtime/test/service.test.ts',
  'services/gateway-proxy/test/proxy.test.ts',
  'services/checkout/test/unmatched-refund.e2e.test.ts',
].map((file) => path.join(__dirname, file));

class LongestFirstSequencer extends Sequencer {
  sort(tests) {
    const timed = super.sort(tests);
    const rank = (test) => {
      const index = LONGEST_FIRST.indexOf(test.path);
      return index === -1 ? LONGEST_FIRST.length : index;
    };
    // super.sort sets each test's duration from jest's cache of earlier runs.
    if (timed.every((test) => test.duration != null)) return timed;
    // Array.prototype.sort is stable: equal ranks keep jest's order.
    return [...timed].sort((a, b) => rank(a) - rank(b));
  }
}

module.exports = LongestFirstSequencer;
