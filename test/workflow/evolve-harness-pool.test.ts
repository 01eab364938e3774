/**
 * evolveHarnessPool's decisions, on a Temporal dev server of its own with
 * fake evolution activities: which tasks each direction targets, which
 * candidates are validated where, which one parents the next round, which
 * directions end with a sibling (and why the others do not), and what is
 * handed to the freeze.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import type { EvolutionGroup } from '../../core/evolution/diagnosis';
import { failureDirectionsFor, type SiblingDirection } from '../../core/evolution/failure-directions';
import type { FreezeRequest } from '../../core/evolution/freeze';
import { parseEvolutionConfig } from '../../core/evolution/config';
import type { PreparedEvolution, ProposalOutcome } from '../../core/evolution/prepared';
import type { ParentResults } from '../../core/evolution/proposal';
import { candidateIdOf, type SelectionDecision } from '../../core/evolution/selection';
import { findTemporalCli } from '../../infra/temporal-cli';
import { evolveHarnessPool } from '../../workflows';
import { TASK_QUEUES } from '../../workflows/definitions';
import type { EvolutionResult } from '../../workflows/evolve-harness-pool';

const DEV_TASKS = [
  { taskId: 'a1', kind: 'a' },
  { taskId: 'a2', kind: 'a' },
  { taskId: 'b1', kind: 'b' },
  { taskId: 'b2', kind: 'b' },
  { taskId: 's1', kind: 'b' },
];

/** Successes of 4 rollouts, by harness and task. */
function successes(candidateId: string, taskId: string): { n: number; failure: EvolutionGroup['failures'] } {
  if (candidateId === 'base') {
    const base: Record<string, [number, EvolutionGroup['failures']]> = {
      a1: [0, { format_error: 4 }],
      a2: [0, { wrong_answer: 4 }],
      b1: [1, { wrong_answer: 3 }],
      b2: [3, { turn_limit: 1 }],
      s1: [4, {}],
    };
    const [n, failure] = base[taskId];
    return { n, failure };
  }
  const rules: Array<[RegExp, Record<string, number>]> = [
    [/^ar-/, { a1: 4, s1: 4 }],
    [/^ec-r1-c1$/, { a2: 2, s1: 4 }],
    [/^ec-r1-c2$/, { a2: 4, b1: 4, s1: 0 }],
    [/^ec-r2-/, { a2: 4, b1: 2, s1: 4 }],
    [/^ps-/, { b1: 1, s1: 4 }],
  ];
  const rule = rules.find(([pattern]) => pattern.test(candidateId));
  const n = rule?.[1][taskId] ?? 0;
  return { n, failure: n < 4 ? { wrong_answer: 4 - n } : {} };
}

const calls = {
  propose: [] as Array<{
    round: number;
    direction: SiblingDirection;
    slot: number;
    parentId: string;
    parentResults: ParentResults | null;
    targetTaskIds: string[];
  }>,
  groups: [] as Array<{ phase: string; candidateId: string; taskId: string }>,
  selections: [] as Array<{ round: number; direction: string; decision: SelectionDecision }>,
  freeze: [] as FreezeRequest[],
};

const config = {
  name: 'fake-evolution',
  directions: ['action_realization', 'environment_contract', 'trajectory_regulation', 'procedural_skill'] as SiblingDirection[],
  rounds: 2,
  candidatesPerDirection: 2,
  rolloutsPerTask: 4,
  regressionTasks: 1,
};

const activities = {
  async prepareEvolution(): Promise<PreparedEvolution> {
    return {
      evolutionId: 'fake-evolution',
      config: parseEvolutionConfig(config),
      env: 'dbbench',
      simulated: false,
      devTasks: DEV_TASKS,
      baseId: 'base',
      baseVersion: 'v0',
      failureDirections: failureDirectionsFor(),
    };
  },
  async runEvolutionGroup(input: { phase: string; candidateId: string; taskId: string; samples: number }): Promise<EvolutionGroup> {
    calls.groups.push({ phase: input.phase, candidateId: input.candidateId, taskId: input.taskId });
    const { n, failure } = successes(input.candidateId, input.taskId);
    return {
      phase: input.phase,
      candidateId: input.candidateId,
      taskId: input.taskId,
      kind: DEV_TASKS.find((t) => t.taskId === input.taskId)!.kind,
      rollouts: 4,
      successes: n,
      failures: failure,
    };
  },
  async proposeCandidate(input: (typeof calls.propose)[number]): Promise<ProposalOutcome> {
    calls.propose.push(input);
    if (input.direction === 'action_realization' && input.slot === 2)
      return { status: 'dropped', slot: 2, reason: 'refused 3 times; last: no json', attempts: 3 };
    const candidateId = candidateIdOf(input.direction, input.round, input.slot);
    return {
      status: 'accepted',
      attempts: 1,
      candidate: { candidateId, direction: input.direction, round: input.round, slot: input.slot, parent: input.parentId, version: 'v' },
    };
  },
  async recordSelection(input: { round: number; direction: string; decision: unknown }): Promise<void> {
    calls.selections.push({ round: input.round, direction: input.direction, decision: input.decision as SelectionDecision });
  },
  async freezePool(input: FreezeRequest): Promise<{ poolHash: string; dir: string }> {
    calls.freeze.push(input);
    return { poolHash: '0123456789abcdef', dir: '/pools/0123456789abcdef' };
  },
};

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
let result: EvolutionResult;

beforeAll(async () => {
  const cli = findTemporalCli();
  if (!cli) throw new Error('no Temporal CLI found: run `npx tsx cli/main.ts setup`');
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  env = await TestWorkflowEnvironment.createLocal({ server: { executable: { type: 'existing-path', path: cli.path } } });
  worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue: TASK_QUEUES.control,
    activities,
    workflowsPath: require.resolve('../../workflows'),
  });
  const rollout = await Worker.create({ connection: env.nativeConnection, taskQueue: TASK_QUEUES.rollout, activities });
  running = Promise.all([worker.run(), rollout.run()]).then(() => undefined);
  result = await env.client.workflow.execute(evolveHarnessPool, {
    workflowId: 'evolve-fake',
    taskQueue: TASK_QUEUES.control,
    args: [{ config }],
  });
  rollout.shutdown();
}, 120_000);
afterAll(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
});

/**
 * A recorded history of this evolution replays on the current code: the pure
 * functions the workflow calls (diagnosis, selection, the effect matrix, task
 * sampling) are part of its determinism contract, and a change to them must
 * come with a patch. HARNESS_S_UPDATE_FIXTURES=1 records it anew.
 */
test('the recorded history of an evolution replays on the current workflow code', async () => {
  const fixture = path.join(__dirname, 'fixtures', 'evolveHarnessPool.pb');
  if (process.env.HARNESS_S_UPDATE_FIXTURES === '1') {
    const history = await env.client.workflow.getHandle('evolve-fake').fetchHistory();
    mkdirSync(path.dirname(fixture), { recursive: true });
    writeFileSync(fixture, temporal.api.history.v1.History.encode(history).finish());
  }
  const recorded = temporal.api.history.v1.History.decode(readFileSync(fixture));
  await expect(
    Worker.runReplayHistory({ workflowsPath: require.resolve('../../workflows') }, recorded, 'evolve-fake-replay'),
  ).resolves.toBeUndefined();
});

test('each direction targets the mostly failed tasks whose failure type calls for it', () => {
  const targets = (direction: SiblingDirection) => [
    ...new Set(calls.propose.filter((p) => p.direction === direction).map((p) => p.targetTaskIds.join(','))),
  ];
  expect(targets('action_realization')).toEqual(['a1']);
  expect(targets('environment_contract')).toEqual(['a2,b1']);
  expect(targets('procedural_skill')).toEqual(['a2,b1']);
  expect(calls.propose.filter((p) => p.direction === 'trajectory_regulation')).toEqual([]);
});

test('the base is measured again on every target, and each candidate on its targets and the regression sample, once', () => {
  const of = (phase: string, candidateId: string) =>
    calls.groups
      .filter((g) => g.phase === phase && g.candidateId === candidateId)
      .map((g) => g.taskId)
      .sort();
  expect(of('diagnose', 'base')).toEqual(['a1', 'a2', 'b1', 'b2', 's1']);
  expect(of('baseline', 'base')).toEqual(['a1', 'a2', 'b1']);
  expect(of('validate', 'ec-r1-c1')).toEqual(['a2', 'b1', 's1']);
  expect(of('validate', 'ar-r1-c1')).toEqual(['a1', 's1']);
  expect(of('validate', 'ar-r1-c2')).toEqual([]);
  expect(result.plan.groups).toEqual({
    diagnose: 5,
    baseline: 3,
    validate: calls.groups.filter((g) => g.phase === 'validate').length,
    effect: 2 * 3,
  });
});

test('a regression costs a candidate the round; the best parents the next round with its results in the prompt', () => {
  const round1 = calls.selections.find((s) => s.round === 1 && s.direction === 'environment_contract')!.decision;
  // ec-r1-c2 rescues every target but breaks the solved task: 1 - 1 = 0 < 0.375.
  expect(round1.kept).toBe('ec-r1-c1');
  const round2 = calls.propose.filter((p) => p.round === 2 && p.direction === 'environment_contract');
  expect(round2.map((p) => p.parentId)).toEqual(['ec-r1-c1', 'ec-r1-c1']);
  expect(round2[0].parentResults).toMatchObject({
    targetRescueRate: 0.25,
    baseRateOnTargets: 0.125,
    regressionRate: 0,
    byKind: { a: 0.5, b: 0 },
  });
  expect(calls.selections.find((s) => s.round === 2 && s.direction === 'environment_contract')!.decision.kept).toBe('ec-r2-c1');
});

test('a dropped proposal is recorded in its selection with the reason', () => {
  const decision = calls.selections.find((s) => s.round === 1 && s.direction === 'action_realization')!.decision;
  expect(decision.dropped).toEqual([{ slot: 2, reason: 'refused 3 times; last: no json' }]);
});

test('only siblings above the base on their targets are frozen; the other directions say why they have none', () => {
  expect(result.siblings.map((s) => [s.id, s.direction])).toEqual([
    ['ar-r1-c1', 'action_realization'],
    ['ec-r2-c1', 'environment_contract'],
  ]);
  expect(calls.freeze).toHaveLength(1);
  expect(calls.freeze[0].siblings.map((s) => s.candidateId)).toEqual(['ar-r1-c1', 'ec-r2-c1']);
  expect(calls.freeze[0].targets['ec-r2-c1']).toEqual(['a/wrong_answer', 'b/wrong_answer']);
  expect(result.withoutSibling).toEqual([
    { direction: 'trajectory_regulation', reason: 'the base harness showed no failure this direction repairs on the dev tasks' },
    { direction: 'procedural_skill', reason: expect.stringContaining('not above the base') },
  ]);
  expect(result.pool).toBe('0123456789abcdef');
  // Every cell here holds one task: no help can be shown with confidence over tasks.
  expect(result.effect.helps).toEqual({ 'ar-r1-c1': [], 'ec-r2-c1': [] });
  expect(result.effect.difference['ec-r2-c1']['a/wrong_answer']).toMatchObject({ n: 1, mean: 1 });
});
