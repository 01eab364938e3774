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

/**
 * Files that start the real CPU stack's servers (a vLLM and a SkyRL each) go to one shard, one after another:
 * two such pairs at once do not fit this machine's memory (SkyRL training SmolLM2 was killed for memory beside
 * the tiny Qwen3's pair).
 */
const ENGINE_FILES = ['test/integration/real-engines.test.ts', 'test/integration/smollm2.test.ts'];
const usesEngines = (test) => ENGINE_FILES.includes(path.relative(ROOT, test.path).split(path.sep).join('/'));

class DurationSequencer extends Sequencer {
  shard(tests, { shardIndex, shardCount }) {
    const lanes = Array.from({ length: shardCount }, () => ({ seconds: 0, tests: [] }));
    const engines = tests.filter(usesEngines);
    const units = [...(engines.length ? [engines] : []), ...tests.filter((t) => !usesEngines(t)).map((t) => [t])];
    const unitSeconds = (unit) => unit.reduce((n, t) => n + seconds(t), 0);
    for (const unit of units.sort((a, b) => unitSeconds(b) - unitSeconds(a) || (a[0].path < b[0].path ? -1 : 1))) {
      const lane = lanes.reduce((least, next) => (next.seconds < least.seconds ? next : least));
      lane.tests.push(...unit);
      lane.seconds += unitSeconds(unit);
    }
    return lanes[shardIndex - 1].tests;
  }

  sort(tests) {
    return [...tests].sort(longestFirst);
  }
}

module.exports = DurationSequencer;
