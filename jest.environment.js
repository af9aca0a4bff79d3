/**
 * jest's node environment, plus two things. A whole-system suite holds a slot (below). And a bigint can be sent from a worker to the runner. A failed assertion on a
 * bigint (`expect(balance).toBe(6n)`) is reported through JSON, which throws on bigints, and the run showed "Do not
 * know how to serialize a BigInt" instead of the failure. Only this realm (the worker's, which serializes results)
 * gets `BigInt.prototype.toJSON`; tests run in their own vm context, whose BigInt is untouched, so code under test
 * still cannot put a bigint into JSON by accident.
 */
const { TestEnvironment: NodeEnvironment } = require('jest-environment-node');
const { wholeSystemSlot } = require('./jest.workers');

if (!Object.hasOwn(BigInt.prototype, 'toJSON')) {
  Object.defineProperty(BigInt.prototype, 'toJSON', {
    value() {
      return `${this}n`;
    },
  });
}

/** Holds one of the run's whole-system slots (jest.workers.js) from setup to teardown, for a suite that needs one. */
class TestEnvironment extends NodeEnvironment {
  constructor(config, context) {
    super(config, context);
    this.slotPath = context.testPath;
  }
  async setup() {
    this.releaseSlot = await wholeSystemSlot(this.slotPath);
    return super.setup();
  }
  async teardown() {
    try {
      await super.teardown();
    } finally {
      this.releaseSlot?.();
    }
  }
}

module.exports = TestEnvironment;

/**
 * `SUITE_CPU_LOG=<file>`: each suite appends the CPU its worker spent from the suite's setup to its teardown (module
 * loading, the tests, the services they start in-process), in ms, tab, the suite's path, tab, the CPU of the child
 * processes that exited meanwhile (services, anvil, Chromium; Linux only, else 0), in ms, tab, the worker's pid (a
 * new pid is a fresh worker, whose first suites load every module cold). This
 * is how docs/benchmarks.md measured where a run's CPU goes, by suite.
 */
if (process.env.SUITE_CPU_LOG) {
  const fs = require('node:fs');
  /** CPU of the worker's children that have exited and been waited for (services, anvil, Chromium), from /proc. */
  const reapedChildrenCpuMs = () => {
    try {
      // After the last ')': a process name may itself hold one. Fields from the state on: cutime and cstime are 13, 14.
      const stat = fs.readFileSync('/proc/self/stat', 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return (Number(fields[13]) + Number(fields[14])) * 10; // in ticks of 10 ms
    } catch {
      return 0;
    }
  };
  class Measured extends TestEnvironment {
    constructor(config, context) {
      super(config, context);
      this.suitePath = context.testPath;
    }
    async setup() {
      this.cpuAtStart = process.cpuUsage();
      this.childrenAtStart = reapedChildrenCpuMs();
      return super.setup();
    }
    async teardown() {
      await super.teardown();
      const cpu = process.cpuUsage(this.cpuAtStart);
      const children = reapedChildrenCpuMs() - this.childrenAtStart;
      fs.appendFileSync(
        process.env.SUITE_CPU_LOG,
        `${Math.round((cpu.user + cpu.system) / 1000)}\t${this.suitePath}\t${children}\t${process.pid}\n`,
      );
    }
  }
  module.exports = Measured;
}

/**
 * `SUITE_CPU_PROFILE_DIR=<dir>`: each suite writes a CPU profile of its worker from setup to teardown
 * (`<suite>.cpuprofile`, for Chrome DevTools or speedscope). `--cpu-prof` is not allowed in NODE_OPTIONS, and it
 * would profile a worker across all its suites.
 */
if (process.env.SUITE_CPU_PROFILE_DIR) {
  const fs = require('node:fs');
  const path = require('node:path');
  const inspector = require('node:inspector');
  const post = (session, method, params) =>
    new Promise((resolve, reject) =>
      session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))),
    );
  const Base = module.exports;
  class Profiled extends Base {
    constructor(config, context) {
      super(config, context);
      this.profileName = path.basename(context.testPath).replace(/\.ts$/, '');
    }
    async setup() {
      this.session = new inspector.Session();
      this.session.connect();
      await post(this.session, 'Profiler.enable');
      await post(this.session, 'Profiler.start');
      return super.setup();
    }
    async teardown() {
      await super.teardown();
      const { profile } = await post(this.session, 'Profiler.stop');
      this.session.disconnect();
      fs.mkdirSync(process.env.SUITE_CPU_PROFILE_DIR, { recursive: true });
      fs.writeFileSync(
        path.join(process.env.SUITE_CPU_PROFILE_DIR, `${this.profileName}.cpuprofile`),
        JSON.stringify(profile),
      );
    }
  }
  module.exports = Profiled;
}
