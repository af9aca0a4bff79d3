/**
 * Orders the suites of a run longest first, from the suite times committed in jest.timings.json (seconds, measured
 * in a whole `make test` on the 2-core machine). Workers take the next suite as they free up, so longest first is
 * the classic LPT schedule: the long suites overlap each other at the start, the short ones fill the gaps at the
 * end, and no long suite starts last to run alone while the other workers sit idle. A clean clone has no jest cache
 * (jest would order by file size: the 100 s browser suite was no larger than many 5 s ones), which is why the
 * times are committed rather than left to jest's cache.
 *
 * A suite the file does not know (new since the file was written) is estimated from its size at the median
 * seconds per byte of the known ones; a suite that failed in this checkout's last run (jest's cache) goes first.
 * `tsx deploy/scripts/test-timings.ts <jest --json output>` rewrites the file from a run. The longest-first list is
 * then dealt as jest.workers.js schedules it, so that no more whole-system suites start together than have slots.
 */
const Sequencer = require('@jest/test-sequencer').default;
const fs = require('node:fs');
const path = require('node:path');

const { slotAwareOrder } = require('./jest.workers');

const TIMINGS_FILE = path.join(__dirname, 'jest.timings.json');

function committedTimings() {
  try {
    return JSON.parse(fs.readFileSync(TIMINGS_FILE, 'utf8')).seconds ?? {};
  } catch {
    return {};
  }
}

function fileSize(file) {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}

class LongestFirstSequencer extends Sequencer {
  sort(tests) {
    // super.sort reads jest's cache of earlier runs in this checkout: each test's duration, and which failed.
    const cached = super.sort(tests);
    const timings = committedTimings();
    const known = (test) => timings[path.relative(__dirname, test.path).split(path.sep).join('/')];
    const perByte = cached
      .map((test) => {
        const seconds = known(test);
        const size = fileSize(test.path);
        return seconds != null && size > 0 ? seconds / size : undefined;
      })
      .filter((rate) => rate !== undefined)
      .sort((a, b) => a - b);
    const medianPerByte = perByte.length ? perByte[Math.floor(perByte.length / 2)] : 0;
    const estimate = new Map(
      cached.map((test) => [
        test,
        known(test) ?? (test.duration != null ? test.duration / 1000 : fileSize(test.path) * medianPerByte),
      ]),
    );
    const failed = (test) => (this.hasFailed(test) ? 1 : 0);
    const longestFirst = [...cached].sort(
      (a, b) => failed(b) - failed(a) || estimate.get(b) - estimate.get(a),
    );
    return slotAwareOrder(longestFirst, (test) => estimate.get(test));
  }
}

module.exports = LongestFirstSequencer;
