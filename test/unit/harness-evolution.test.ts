import { SimEnvironment } from '../../core/envs/sim/environment';
import { loadSimWorld } from '../../core/envs/sim/world';
import { parseEvolutionConfig } from '../../core/evolution/config';
import { baseSpecFor, envFailureDirections, harnessSpaceFor } from '../../core/envs/registry';
import { judgeAnswer } from '../../core/evolution/proposal';
import { allTargets, diagnoseFailures, type EvolutionGroup } from '../../core/evolution/diagnosis';
import { measurePoolEffect } from '../../core/evolution/effect-matrix';
import type { SiblingDirection } from '../../core/evolution/failure-directions';
import { lineageOf } from '../../core/evolution/freeze';
import { beatsBase, selectForDirection, summarizeCandidate, type CandidateRef } from '../../core/evolution/selection';

const group = (
  candidateId: string,
  taskId: string,
  kind: string,
  successes: number,
  failures: EvolutionGroup['failures'] = {},
  rollouts = 4,
): EvolutionGroup => ({
  phase: 'x',
  candidateId,
  taskId,
  kind,
  rollouts,
  successes,
  failures,
});

describe('failure directions', () => {
  test('a format error calls for action realization and a turn limit for trajectory regulation', () => {
    const mapping = envFailureDirections({ kind: 'dbbench', data: 'x', scoring: 'exact' });
    expect(mapping.format_error).toEqual(['action_realization']);
    expect(mapping.turn_limit).toEqual(['trajectory_regulation']);
    expect(mapping.policy_error).toEqual([]);
  });

  test("the sim maps its wrong answers (early finishes) to trajectory regulation too, and a config's override wins", () => {
    expect(envFailureDirections({ kind: 'sim' }).wrong_answer).toContain('trajectory_regulation');
    expect(envFailureDirections({ kind: 'sim' }, { wrong_answer: ['procedural_skill'] }).wrong_answer).toEqual(['procedural_skill']);
  });
});

describe('diagnoseFailures', () => {
  const mapping = envFailureDirections({ kind: 'dbbench', data: 'x', scoring: 'exact' });
  const groups = [
    group('base', 't1', 'select', 0, { format_error: 3, wrong_answer: 1 }),
    group('base', 't2', 'select', 1, { execution_error: 3 }),
    group('base', 't3', 'insert', 4),
    group('base', 't4', 'insert', 3, { turn_limit: 1 }),
    group('base', 't5', 'insert', 2, { turn_limit: 2 }),
  ];
  const diagnosis = diagnoseFailures(groups, mapping, ['action_realization', 'environment_contract', 'trajectory_regulation']);

  test('a task mostly failed goes to the directions its most common failure type calls for', () => {
    expect(diagnosis.targets.action_realization).toEqual([{ taskId: 't1', kind: 'select', failureType: 'format_error' }]);
    expect(diagnosis.targets.environment_contract).toEqual([{ taskId: 't2', kind: 'select', failureType: 'execution_error' }]);
    expect(diagnosis.targets.trajectory_regulation).toEqual([{ taskId: 't5', kind: 'insert', failureType: 'turn_limit' }]);
  });

  test('a task failed on fewer than half its rollouts is no target; one solved on every rollout can be a regression task', () => {
    expect(allTargets(diagnosis).map((t) => t.taskId)).not.toContain('t4');
    expect(diagnosis.solved).toEqual([{ taskId: 't3', kind: 'insert' }]);
    expect(diagnosis.baseSuccess).toBeCloseTo(10 / 20);
    expect(diagnosis.failures.select).toEqual({ format_error: 3, wrong_answer: 1, execution_error: 3 });
  });

  test('a direction not asked for gets no targets', () => {
    expect(diagnosis.targets.procedural_skill).toBeUndefined();
  });
});

describe('selection', () => {
  const targets = [
    { taskId: 't1', kind: 'a', failureType: 'wrong_answer' as const },
    { taskId: 't2', kind: 'b', failureType: 'wrong_answer' as const },
  ];
  const baseline = [group('base', 't1', 'a', 0), group('base', 't2', 'b', 1)];
  const ref = (candidateId: string, slot: number): CandidateRef => ({
    candidateId,
    direction: 'procedural_skill',
    round: 1,
    slot,
    parent: 'base',
    version: 'v',
  });
  const result = (candidateId: string, slot: number, t1: number, t2: number, regression: number) =>
    summarizeCandidate({
      candidate: ref(candidateId, slot),
      groups: [group(candidateId, 't1', 'a', t1), group(candidateId, 't2', 'b', t2), group(candidateId, 'r1', 'a', regression)],
      targets,
      regressionTaskIds: ['r1'],
      baseline,
      penalty: 1,
    });

  test("a candidate's rescue rate, the base's on the same targets, and its regressions make its score", () => {
    const r = result('ps-r1-c1', 1, 4, 2, 3);
    expect(r.targetRescueRate).toBeCloseTo(6 / 8);
    expect(r.baseRateOnTargets).toBeCloseTo(1 / 8);
    expect(r.regressionRate).toBeCloseTo(1 / 4);
    expect(r.score).toBeCloseTo(6 / 8 - 1 / 4);
    expect(r.byKind).toEqual({ a: { rollouts: 4, successes: 4 }, b: { rollouts: 4, successes: 2 } });
  });

  test('the best score is kept, and a regression costs a candidate its lead', () => {
    const breaker = result('ps-r1-c1', 1, 4, 4, 0);
    const careful = result('ps-r1-c2', 2, 4, 2, 4);
    const { best, decision } = selectForDirection({
      round: 1,
      direction: 'procedural_skill',
      previous: null,
      results: [breaker, careful],
      dropped: [{ slot: 3, reason: 'invalid' }],
    });
    expect(best?.candidateId).toBe('ps-r1-c2');
    expect(decision.ranked.map((r) => r.candidateId)).toEqual(['ps-r1-c2', 'ps-r1-c1']);
    expect(decision.dropped).toEqual([{ slot: 3, reason: 'invalid' }]);
  });

  test('on a tie the candidate kept before stays', () => {
    const previous = result('ps-r1-c1', 1, 4, 2, 4);
    const same = { ...result('ps-r2-c1', 1, 4, 2, 4), round: 2 };
    const { best, decision } = selectForDirection({ round: 2, direction: 'procedural_skill', previous, results: [same], dropped: [] });
    expect(best?.candidateId).toBe('ps-r1-c1');
    expect(decision.reason).toContain('kept ps-r1-c1');
  });

  test('a sibling enters the pool only when it rescues more of its targets than the base solves', () => {
    expect(beatsBase(result('ps-r1-c1', 1, 1, 0, 4))).toBe(false);
    expect(beatsBase(result('ps-r1-c1', 1, 2, 0, 4))).toBe(true);
    expect(beatsBase(null)).toBe(false);
  });
});

describe('measurePoolEffect', () => {
  const targets = [
    { taskId: 'l1', kind: 'lookup', failureType: 'wrong_answer' as const },
    { taskId: 'l2', kind: 'lookup', failureType: 'wrong_answer' as const },
    { taskId: 'a1', kind: 'api', failureType: 'format_error' as const },
    { taskId: 'a2', kind: 'api', failureType: 'format_error' as const },
  ];
  const on = (harness: string, wins: Record<string, number>) => targets.map((t) => group(harness, t.taskId, t.kind, wins[t.taskId] ?? 0));
  const base = on('base', { l1: 1 });

  test('siblings that each help their own cells, with 95% confidence over the tasks, show locality and complementarity', () => {
    const effect = measurePoolEffect({
      targets,
      base: 'base',
      siblings: ['ec', 'ar'],
      groups: [...base, ...on('ec', { l1: 4, l2: 3 }), ...on('ar', { a1: 4, a2: 4 })],
    });
    expect(effect.cells).toEqual(['api/format_error', 'lookup/wrong_answer']);
    expect(effect.helps).toEqual({ ec: ['lookup/wrong_answer'], ar: ['api/format_error'] });
    expect(effect.difference.ec['lookup/wrong_answer'].mean).toBeCloseTo(((4 - 1) / 4 + 3 / 4) / 2);
    expect(effect.locality).toBe(true);
    expect(effect.complementarity).toEqual({ unionCells: 2, bestSingleCells: 1, shown: true });
  });

  test('a gain on one task of a cell is no help with confidence; a sibling that helps everywhere shows neither (control)', () => {
    const effect = measurePoolEffect({
      targets,
      base: 'base',
      siblings: ['all', 'lucky'],
      groups: [...base, ...on('all', { l1: 4, l2: 3, a1: 4, a2: 4 }), ...on('lucky', { a1: 4 })],
    });
    expect(effect.helps).toEqual({ all: ['api/format_error', 'lookup/wrong_answer'], lucky: [] });
    expect(effect.locality).toBe(false);
    expect(effect.complementarity.shown).toBe(false);
  });
});

describe('lineageOf', () => {
  test("a sibling's ancestors from the base", () => {
    const candidates = [
      { candidateId: 'ec-r1-c2', parent: 'base' },
      { candidateId: 'ec-r2-c1', parent: 'ec-r1-c2' },
    ];
    expect(lineageOf('ec-r2-c1', candidates, 'base')).toEqual(['base', 'ec-r1-c2', 'ec-r2-c1']);
  });
});

describe('EvolutionConfig', () => {
  test('the defaults evolve the sim base with the SIMULATED proposer along all four directions', () => {
    const config = parseEvolutionConfig({});
    expect(config.env).toEqual({ kind: 'sim' });
    expect(config.proposers[0].model).toBe('sim-proposer');
    expect(config.directions).toHaveLength(4);
  });

  test('an unknown key, a repeated direction and a literal API key are refused, each named by its path', () => {
    expect(() => parseEvolutionConfig({ round: 2 })).toThrow(/round/);
    expect(() => parseEvolutionConfig({ directions: ['procedural_skill', 'procedural_skill'] })).toThrow(
      /directions: list each direction once/,
    );
    expect(() => parseEvolutionConfig({ proposers: [{ baseUrl: 'http://x/v1', model: 'm', apiKey: 'sk-123' }] })).toThrow(/proposers\.0/);
  });

  test('the base direction is no direction to evolve along', () => {
    expect(() => parseEvolutionConfig({ directions: ['base'] })).toThrow(/directions\.0/);
  });
});

describe('EvolutionConfig for envs other than the sim', () => {
  test('the SIMULATED sim-proposer (the default) is refused for DBBench, naming the proposer', () => {
    expect(() => parseEvolutionConfig({ env: { kind: 'dbbench', data: 'x.jsonl' } })).toThrow(
      /proposers\.0\.model: the SIMULATED sim-proposer proposes sim harnesses only/,
    );
  });
});

describe('judging a proposer answer', () => {
  const env = new SimEnvironment(loadSimWorld());
  const space = harnessSpaceFor({ kind: 'sim' }, env);
  const base = baseSpecFor({ kind: 'sim' }, env, undefined);
  const judge = (answer: string, direction: SiblingDirection = 'environment_contract') =>
    judgeAnswer({ answer, space, direction, parent: base, candidateId: 'ec-r1-c1', parentId: 'base' });
  const fenced = (value: unknown) => `My proposal:\n\`\`\`json\n${JSON.stringify(value)}\n\`\`\``;

  test('a patch of the base in the asked direction becomes a whole spec with the id and parent the workflow gives', () => {
    const verdict = judge(fenced({ patch: { hints: ['read_docs'], description: 'Points at the tool docs.' } }));
    expect(verdict).toMatchObject({
      verdict: 'accepted',
      spec: { id: 'ec-r1-c1', parent: 'base', direction: 'environment_contract', hints: ['read_docs'] },
    });
  });

  test('in the sim, environment_contract may add only behaviours that consult the environment, and procedural skill only the others', () => {
    expect(judge(fenced({ patch: { hints: ['plan'] } }))).toMatchObject({
      verdict: 'off_direction',
      reason: expect.stringContaining('plan is procedure'),
    });
    expect(judge(fenced({ patch: { hints: ['inspect_schema'] } }), 'procedural_skill')).toMatchObject({ verdict: 'off_direction' });
    expect(judge(fenced({ patch: { hints: ['plan', 'verify'] } }), 'procedural_skill')).toMatchObject({ verdict: 'accepted' });
  });

  test('a change to a field another direction owns is out of direction, naming the field', () => {
    expect(judge(fenced({ patch: { formatHint: true } }))).toMatchObject({
      verdict: 'off_direction',
      reason: expect.stringContaining('formatHint'),
    });
  });

  test('an unknown behaviour, an unchanged spec, a list patch and prose are refused, each saying why', () => {
    expect(judge(fenced({ patch: { hints: ['teleport'] } }))).toMatchObject({
      verdict: 'invalid',
      reason: expect.stringContaining("unknown behaviour 'teleport'"),
    });
    expect(judge(fenced({ patch: { description: 'New words only.' } }))).toMatchObject({
      verdict: 'invalid',
      reason: expect.stringContaining('changes nothing'),
    });
    expect(judge(fenced({ patch: [{ op: 'add', path: '/hints/-', value: 'read_docs' }] }))).toMatchObject({
      verdict: 'invalid',
      reason: expect.stringContaining('RFC 7386'),
    });
    expect(judge('I would hint read_docs.')).toEqual({ verdict: 'invalid', reason: 'the answer holds no ```json block' });
  });
});
