/**
 * The order and the shards of the test files, from their measured durations
 * (test/durations.json, written by `node test/file-times.mjs --write` from a
 * Jest JSON report): the longest files first, and with `--shard=i/n` each file
 * to the shard with the least measured time so far, so the integration lanes
 * of `npm test` end together. A file not measured yet counts as 30 s.
 */
const path = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;
const DURATIONS = require('./durations.json');

const ROOT = path.resolve(__dirname, '..');
const UNMEASURED_SECONDS = 30;
const seconds = (test) => DURATIONS[path.relative(ROOT, test.path).split(path.sep).join('/')] ?? UNMEASURED_SECONDS;
const longestFirst = (a, b) => seconds(b) - seconds(a) || (a.path < b.path ? -1 : 1);

class DurationSequencer extends Sequencer {
  shard(tests, { shardIndex, shardCount }) {
    const lanes = Array.from({ length: shardCount }, () => ({ seconds: 0, tests: [] }));
    for (const test of [...tests].sort(longestFirst)) {
      const lane = lanes.reduce((least, next) => (next.seconds < least.seconds ? next : least));
      lane.tests.push(test);
      lane.seconds += seconds(test);
    }
    return lanes[shardIndex - 1].tests;
  }

  sort(tests) {
    return [...tests].sort(longestFirst);
  }
}

module.exports = DurationSequencer;
