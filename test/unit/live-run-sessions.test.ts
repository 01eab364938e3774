/**
 * A trainer worker's loop over the run store's live runs: which trainer
 * sessions its keepers heartbeat (core/trainer/tinker/sessions.ts). The run store
 * is a list here; no heartbeat is sent (the keepers' clocks are an hour).
 */
import type { Logger } from 'pino';
import { keepLiveRunSessions, TrainerSessions, type LiveRunSessions } from '../../core/trainer/tinker/sessions';
import type { LiveTrainerSession } from '../../core/store/run-store';

const HOUR = 3600;
const warnings: string[] = [];
const logger = {
  warn: (fields: { runId?: string }, message: string) => warnings.push(fields.runId ? `${fields.runId}: ${message}` : message),
  info: () => undefined,
} as unknown as Logger;

let sessions: TrainerSessions;
let loop: LiveRunSessions | null = null;
let live: LiveTrainerSession[] = [];
const store = { liveTrainerSessions: async () => live };
const keys: Record<string, string> = { TRAINER_A_API_KEY: 'key-a' };
const apiKey = (name: string | null) => {
  if (name === null) return 'EMPTY';
  if (!(name in keys)) throw new Error(`$${name} is not set`);
  return keys[name];
};

beforeEach(() => {
  warnings.length = 0;
  sessions = new TrainerSessions(logger, HOUR);
});
afterEach(() => {
  loop?.close();
  sessions.close();
});

const run = (runId: string, sessionId: string, trainerBaseUrl: string, trainerApiKeyEnv: string | null = null): LiveTrainerSession => ({
  runId,
  sessionId,
  trainerBaseUrl,
  trainerApiKeyEnv,
});

test("each live run's session is kept by the keeper of its trainer and key", async () => {
  live = [run('r1', 's1', 'http://a'), run('r2', 's2', 'http://a'), run('r3', 's3', 'http://b', 'TRAINER_A_API_KEY')];
  loop = keepLiveRunSessions({ sessions, store, logger, everySeconds: HOUR, apiKey });
  await loop.refresh();
  expect(sessions.for('http://a', 'EMPTY').keptSessions().sort()).toEqual(['s1', 's2']);
  expect(sessions.for('http://b', 'key-a').keptSessions()).toEqual(['s3']);
});

test('a session whose run is no longer live is let go at the next read', async () => {
  live = [run('r1', 's1', 'http://a'), run('r2', 's2', 'http://a')];
  loop = keepLiveRunSessions({ sessions, store, logger, everySeconds: HOUR, apiKey });
  await loop.refresh();
  live = [run('r2', 's2', 'http://a')];
  await loop.refresh();
  expect(sessions.for('http://a', 'EMPTY').keptSessions()).toEqual(['s2']);
  live = [];
  await loop.refresh();
  expect(sessions.for('http://a', 'EMPTY').keptSessions()).toEqual([]);
});

test('a run whose trainer key this worker lacks is skipped, with one warning however often it is read', async () => {
  live = [run('r1', 's1', 'http://a', 'TRAINER_B_API_KEY'), run('r2', 's2', 'http://a')];
  loop = keepLiveRunSessions({ sessions, store, logger, everySeconds: HOUR, apiKey });
  await loop.refresh();
  await loop.refresh();
  expect(sessions.for('http://a', 'EMPTY').keptSessions()).toEqual(['s2']);
  expect(warnings).toEqual(["r1: this worker cannot keep the run's trainer session alive: it lacks the trainer key"]);
});

test('when the run store cannot be read, the sessions of the last read stay kept', async () => {
  live = [run('r1', 's1', 'http://a')];
  let down = false;
  const flaky = { liveTrainerSessions: async () => (down ? Promise.reject(new Error('connection refused')) : live) };
  loop = keepLiveRunSessions({ sessions, store: flaky, logger, everySeconds: HOUR, apiKey });
  await loop.refresh();
  down = true;
  await loop.refresh();
  expect(sessions.for('http://a', 'EMPTY').keptSessions()).toEqual(['s1']);
  expect(warnings).toEqual(["cannot read the live runs' trainer sessions from the run store; keeping the last ones read"]);
});

test('a session the trainer said it no longer knows is not heartbeated again while its run is listed', () => {
  const keeper = sessions.for('http://a', 'EMPTY');
  keeper.keepOnly(['s1', 's2']);
  keeper.forget('s1');
  keeper.keepOnly(['s1', 's2']);
  expect(keeper.keptSessions()).toEqual(['s2']);
});
