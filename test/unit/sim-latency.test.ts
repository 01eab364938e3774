/**
 * The SIMULATED latency model (sim-cluster/latency.ts) on Jest's fake
 * timers: every wait is exact, so the formula, the sequence cap and the
 * speedup are checked to the millisecond without real time passing.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LatencyProfileError, loadLatencyProfiles, type LatencyProfile } from '../../core/latency-profiles';
import { LatencyModel } from '../../sim-cluster/latency';

/**
 * Round numbers: a request of 100 prompt and 10 completion tokens takes
 * 100/1000 + 10*(n+4)/100 s as the n-th in flight: 600 ms alone, 700 ms as the second.
 */
const PROFILE: LatencyProfile = {
  description: 'test',
  sources: 'test',
  tokenScale: 1,
  inference: {
    servers: 1,
    prefillTokensPerSecond: 1000,
    peakDecodeTokensPerSecond: 100,
    halfSaturationSequences: 4,
    maxSequencesPerServer: 2,
  },
  trainer: { trainTokensPerSecond: 1000, optimStepSeconds: 0.5, saveWeightsForSamplerSeconds: 2, saveWeightsSeconds: 3 },
  publish: { adapterLoadSeconds: 1 },
};

function model(overrides: { servers?: number; maxSequencesPerServer?: number } = {}, speedup = 1): LatencyModel {
  return new LatencyModel('test', { ...PROFILE, inference: { ...PROFILE.inference, ...overrides } }, speedup);
}

/** Starts `count` completions of 100 + 10 tokens at once; resolves each one's finish time (fake ms since start). */
function startCompletions(latency: LatencyModel, count: number): Array<Promise<number>> {
  const t0 = performance.now();
  return Array.from({ length: count }, () => latency.completion(100, 10).then(() => performance.now() - t0));
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

describe('latency model: inference', () => {
  it('gives prefill + decode time, the per-token decode time growing with the sequences in flight', () => {
    const latency = model();
    expect(latency.completionSeconds(100, 10, 1)).toBeCloseTo(0.1 + (10 * 5) / 100, 12);
    const times = [1, 2, 8, 64].map((n) => latency.completionSeconds(100, 10, n));
    expect(times).toEqual([...times].sort((a, b) => a - b));
    expect(new Set(times).size).toBe(4);
    // Aggregate decode (n sequences at peak/(n+h) each) rises with n and stays below the peak.
    const aggregate = [1, 2, 8, 64, 4096].map((n) => (n * 10) / latency.completionSeconds(0, 10, n));
    expect(aggregate).toEqual([...aggregate].sort((a, b) => a - b));
    expect(aggregate.at(-1)!).toBeLessThan(100);
    expect(aggregate.at(-1)!).toBeGreaterThan(99);
  });

  it('times a request by how many are in flight when it is admitted', async () => {
    const latency = model();
    const alone = startCompletions(latency, 1);
    await jest.advanceTimersByTimeAsync(1000);
    expect(await alone[0]).toBe(600);

    const pair = startCompletions(latency, 2);
    await jest.advanceTimersByTimeAsync(1000);
    expect(await Promise.all(pair)).toEqual([600, 700]);
  });

  it('queues a request while the server holds maxSequencesPerServer, first come first served', async () => {
    const latency = model({ maxSequencesPerServer: 2 });
    const finished = startCompletions(latency, 3);
    await jest.advanceTimersByTimeAsync(1);
    expect(latency.inFlight()).toEqual([2]);
    expect(latency.queued()).toBe(1);
    await jest.advanceTimersByTimeAsync(2000);
    // The third takes the first one's slot at 600 ms, as the second in flight: 600 + 700.
    expect(await Promise.all(finished)).toEqual([600, 700, 1300]);
    expect(latency.inFlight()).toEqual([0]);
    expect(latency.queued()).toBe(0);
  });

  it('sends a request to the least loaded replica', async () => {
    const latency = model({ servers: 2 });
    const finished = startCompletions(latency, 3);
    await jest.advanceTimersByTimeAsync(1);
    expect(latency.inFlight()).toEqual([2, 1]);
    await jest.advanceTimersByTimeAsync(1000);
    expect(await Promise.all(finished)).toEqual([600, 600, 700]);
  });

  it('accounts busy time per replica, averaged, with requests and tokens; reset zeroes it and restarts the clock', async () => {
    const latency = model({ servers: 2 });
    void latency.completion(100, 10); // replica 0 busy 600 ms, replica 1 idle
    await jest.advanceTimersByTimeAsync(1000);
    const report = latency.report();
    expect(report).toMatchObject({ simulated: true, enabled: true, profile: 'test', speedup: 1, simulatedSeconds: 1 });
    expect(report.inference).toEqual({ busySeconds: 0.3, requests: 1, promptTokens: 100, completionTokens: 10, servers: 2 });

    latency.reset();
    await jest.advanceTimersByTimeAsync(250);
    expect(latency.report()).toMatchObject({
      simulatedSeconds: 0.25,
      inference: { busySeconds: 0, requests: 0, promptTokens: 0, completionTokens: 0 },
      trainer: { busySeconds: 0, ops: 0, tokens: 0 },
    });
  });
});

describe('latency model: trainer and publish', () => {
  it('times forward_backward by its tokens, the saves and optim_step by fixed costs, and leaves other ops to the trainer', () => {
    const latency = model();
    expect(latency.trainerOpSeconds('forward_backward', 2000)).toBe(2);
    expect(latency.trainerOpSeconds('forward_backward', 4000)).toBe(4);
    expect(latency.trainerOpSeconds('forward', 3000)).toBe(1);
    expect(latency.trainerOpSeconds('optim_step')).toBe(0.5);
    expect(latency.trainerOpSeconds('save_weights_for_sampler')).toBe(2);
    expect(latency.trainerOpSeconds('save_weights')).toBe(3);
    for (const route of ['create_model', 'load_weights', 'unload_model', 'sample']) {
      expect(latency.timesTrainerOp(route)).toBe(false);
      expect(latency.trainerOpSeconds(route)).toBeUndefined();
    }
  });

  it('runs trainer ops one at a time, whichever model sent them, and accounts them', async () => {
    const latency = model();
    const t0 = performance.now();
    const done = [latency.trainerOp('forward_backward', 1000), latency.trainerOp('optim_step')].map((p) =>
      p.then(() => performance.now() - t0),
    );
    await jest.advanceTimersByTimeAsync(2000);
    expect(await Promise.all(done)).toEqual([1000, 1500]);
    expect(latency.report().trainer).toEqual({ busySeconds: 1.5, ops: 2, tokens: 1000 });
  });

  it('takes adapterLoadSeconds to load an adapter', async () => {
    const latency = model();
    const t0 = performance.now();
    const loaded = latency.adapterLoad().then(() => performance.now() - t0);
    await jest.advanceTimersByTimeAsync(2000);
    expect(await loaded).toBe(1000);
    expect(latency.report().publish).toEqual({ busySeconds: 1, adapterLoads: 1 });
  });
});

describe('latency model: speedup', () => {
  it('divides every real wait by the speedup and reports the same simulated seconds', async () => {
    const reports = [];
    for (const speedup of [1, 10]) {
      const latency = model({ maxSequencesPerServer: 2 }, speedup);
      const finished = startCompletions(latency, 3);
      const trained = latency.trainerOp('forward_backward', 500);
      await jest.advanceTimersByTimeAsync(2000 / speedup);
      expect(await Promise.all(finished)).toEqual([600, 700, 1300].map((ms) => ms / speedup));
      await trained;
      reports.push(latency.report());
    }
    expect(reports[1].simulatedSeconds).toBeCloseTo(reports[0].simulatedSeconds, 9);
    expect(reports[1].inference.busySeconds).toBeCloseTo(reports[0].inference.busySeconds, 9);
    expect(reports[1].inference.busySeconds).toBeCloseTo(1.3, 9);
    expect(reports[1].trainer.busySeconds).toBeCloseTo(reports[0].trainer.busySeconds, 9);
    expect(reports[1].trainer.busySeconds).toBeCloseTo(0.5, 9);
  });

  it('refuses a speedup below 1', () => {
    expect(() => model({}, 0.5)).toThrow(/speedup must be a number >= 1 \(got 0\.5\)/);
    expect(() => model({}, Number.NaN)).toThrow(LatencyProfileError);
  });
});

describe('latency profiles file', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'sim-latency-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('ships valid balanced, 8b-8gpu and agent-rollout-heavy profiles, each saying where its figures come from', () => {
    const profiles = loadLatencyProfiles();
    expect(Object.keys(profiles)).toEqual(expect.arrayContaining(['balanced', '8b-8gpu', 'agent-rollout-heavy']));
    for (const profile of Object.values(profiles)) expect(profile.sources.length).toBeGreaterThan(40);
  });

  it('names the profile and the field of every problem', () => {
    const file = path.join(dir, 'bad.json');
    const bad = { ...PROFILE, inference: { ...PROFILE.inference, servers: 0 }, trainer: { ...PROFILE.trainer, trainTokensPerSecond: -1 } };
    writeFileSync(file, JSON.stringify({ profiles: { good: PROFILE, broken: bad, typo: { ...PROFILE, tokenscale: 2 } } }));
    const message = (() => {
      try {
        loadLatencyProfiles(file);
      } catch (err) {
        expect(err).toBeInstanceOf(LatencyProfileError);
        return (err as Error).message;
      }
      throw new Error('expected an error');
    })();
    expect(message).toContain(`latency profiles ${file} are invalid`);
    expect(message).toMatch(/profile 'broken' field inference\.servers: /);
    expect(message).toMatch(/profile 'broken' field trainer\.trainTokensPerSecond: /);
    expect(message).toMatch(/profile 'typo'.*tokenscale/);
    expect(message).not.toContain("'good'");
  });

  it('refuses an unknown profile name, listing the known ones', () => {
    expect(() => LatencyModel.fromOptions({ profile: 'h100-dreams' })).toThrow(
      /unknown latency profile 'h100-dreams'; known profiles \(.*latency-profiles\.json\): .*balanced.*8b-8gpu.*agent-rollout-heavy/,
    );
  });

  it('builds the named profile with its speedup', () => {
    const latency = LatencyModel.fromOptions({ profile: 'balanced', speedup: 20 });
    expect(latency.profileName).toBe('balanced');
    expect(latency.speedup).toBe(20);
    expect(latency.report()).toMatchObject({ profile: 'balanced', speedup: 20, inference: { servers: latency.profile.inference.servers } });
  });
});
