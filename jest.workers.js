/**
 * How many suites run at once, and how many of them may start a whole system. The shared Postgres has 100
 * connections: a deploy/ suite starts the seven services (or several of them, or the dev runner) with pools of their
 * own, so four of those at once ran out of connections, while any two beside two package suites fit. Four workers
 * on two cores keep the CPUs busy while suites wait for blocks and child processes (a clean-clone run: 289 s of jest
 * against 354 s with three). jest.config.js reads the worker count, jest.sequencer.js orders the suites so that a
 * worker seldom waits for a slot, and jest.environment.js holds a slot for the whole of each such suite.
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const WORKERS = 4;
const WHOLE_SYSTEM_SLOTS = 2;
/** A suite waits at most this long for a slot (the longest suite takes about 90 s). */
const SLOT_WAIT_MS = 15 * 60 * 1000;
const ROOT = __dirname;

/** deploy/'s suites other than the unit tests start whole systems. */
function startsWholeSystem(testPath) {
  const relative = path.relative(ROOT, testPath).split(path.sep).join('/');
  return relative.startsWith('deploy/test/') && !relative.endsWith('.unit.test.ts');
}

function ownerAlive(slotDir) {
  try {
    const pid = Number(fs.readFileSync(path.join(slotDir, 'pid'), 'utf8'));
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: alive under another user. A missing pid file: the owner is between mkdir and writing it.
    return error.code === 'EPERM' || error.code === 'ENOENT';
  }
}

function tryTakeSlot(dir) {
  for (let slot = 0; slot < WHOLE_SYSTEM_SLOTS; slot++) {
    const slotDir = path.join(dir, `slot-${slot}`);
    try {
      fs.mkdirSync(slotDir);
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
      // A worker that died inside a suite left its slot behind.
      if (!ownerAlive(slotDir)) fs.rmSync(slotDir, { recursive: true, force: true });
      continue;
    }
    fs.writeFileSync(path.join(slotDir, 'pid'), String(process.pid));
    return () => fs.rmSync(slotDir, { recursive: true, force: true });
  }
  return undefined;
}

/**
 * Takes one of the run's slots for a whole-system suite (none for others) and answers its release. The slots are
 * directories under one per run (the workers share their parent, the jest process); a freed slot wakes the waiters
 * through fs.watch, and a one-second check covers a missed event and a dead owner.
 */
async function wholeSystemSlot(testPath, dir = path.join(os.tmpdir(), `paygate-jest-slots-${process.ppid}`)) {
  if (!startsWholeSystem(testPath)) return () => {};
  fs.mkdirSync(dir, { recursive: true });
  const deadline = Date.now() + SLOT_WAIT_MS;
  for (;;) {
    const release = tryTakeSlot(dir);
    if (release) return release;
    if (Date.now() > deadline)
      throw new Error(`no whole-system slot free within ${SLOT_WAIT_MS} ms (${dir})`);
    await new Promise((resolve) => {
      const watcher = fs.watch(dir, () => done());
      const timer = setTimeout(() => done(), 1000);
      function done() {
        watcher.close();
        clearTimeout(timer);
        resolve();
      }
    });
  }
}

/**
 * The start order of a list schedule on WORKERS workers where at most WHOLE_SYSTEM_SLOTS whole-system suites run at
 * once: each worker that frees up takes the first suite (of `ordered`, longest first) that it may start. Jest hands
 * the suites out in this order as its workers free up.
 */
function slotAwareOrder(ordered, secondsOf, workers = WORKERS, slots = WHOLE_SYSTEM_SLOTS) {
  const pending = [...ordered];
  const started = [];
  const running = [];
  let now = 0;
  while (pending.length > 0) {
    const heavyRunning = running.filter((suite) => suite.heavy).length;
    const next =
      running.length < workers
        ? pending.findIndex((test) => heavyRunning < slots || !startsWholeSystem(test.path))
        : -1;
    if (next >= 0) {
      const [test] = pending.splice(next, 1);
      started.push(test);
      running.push({ end: now + secondsOf(test), heavy: startsWholeSystem(test.path) });
      continue;
    }
    running.sort((a, b) => a.end - b.end);
    now = running.shift().end;
  }
  return started;
}

module.exports = { WORKERS, WHOLE_SYSTEM_SLOTS, startsWholeSystem, wholeSystemSlot, slotAwareOrder };
