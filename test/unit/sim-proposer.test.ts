import { answerProposalRequest, type ProposerMessage, SIM_PROPOSER_MODEL, simProposal } from '../../core/envs/sim/proposer';
import { SimHarness } from '../../core/envs/sim/world';

const BEHAVIOURS = ['inspect_schema', 'read_docs', 'plan', 'compute', 'verify'];
const CONTRACT = ['inspect_schema', 'read_docs'];
const base = SimHarness.parse({ id: 'base', parent: null, direction: 'base', description: 'The plain harness.' });

type Turn = { role: 'assistant' | 'user'; content: string };

function failing(taskId: string, failureType: string, turns: Turn[]) {
  return { taskId, kind: taskId.replace(/-\d+$/, ''), failureType, turns };
}

/**
 * Five failing trajectories of two kinds. lookup comes first in the list but
 * multi_step has more failures, so multi_step is the first focus kind.
 * Skipped by (of the kind's failures):
 *   multi_step (3): read_docs 3, verify 3, plan 2, inspect_schema 1, compute 1
 *     (compute counts as performed when the policy wrote it malformed, `Maybe:`;
 *     inspect_schema when the harness did it)
 *   lookup (2):     inspect_schema 2, plan 2, compute 2, verify 2, read_docs 1
 */
const failures = [
  failing('lookup-003', 'wrong_answer', [
    { role: 'assistant', content: 'Action: finish' },
    { role: 'user', content: 'Observation: wrong answer' },
  ]),
  failing('multi_step-010', 'wrong_answer', [
    { role: 'assistant', content: 'Action: plan' },
    { role: 'user', content: 'Observation: plan done' },
    { role: 'assistant', content: 'Action: compute' },
    { role: 'user', content: 'Observation: compute done' },
    { role: 'assistant', content: 'Action: finish' },
  ]),
  failing('multi_step-011', 'wrong_answer', [
    { role: 'assistant', content: 'Action: inspect_schema' },
    { role: 'assistant', content: 'Action: finish' },
  ]),
  failing('lookup-008', 'wrong_answer', [
    { role: 'assistant', content: 'Action: read_docs' },
    { role: 'assistant', content: 'Action: finish' },
  ]),
  failing('multi_step-014', 'format_error', [
    { role: 'user', content: 'Observation: inspect_schema done by harness' },
    { role: 'assistant', content: 'Maybe: compute' },
    { role: 'user', content: 'Observation: unknown action' },
  ]),
];

type Direction = 'action_realization' | 'environment_contract' | 'procedural_skill' | 'trajectory_regulation';

interface RequestOptions {
  slot?: number;
  round?: number;
  parent?: SimHarness;
  behaviours?: string[];
  contractBehaviours?: string[];
  failures?: unknown[];
}

function request(direction: Direction, options: RequestOptions = {}) {
  return {
    env: 'sim',
    direction,
    directionMeaning: '(what the direction means)',
    round: options.round ?? 1,
    slot: options.slot ?? 1,
    parent: options.parent ?? base,
    specSchema: {},
    mayChange: [],
    envFacts: {
      behaviours: options.behaviours ?? BEHAVIOURS,
      contractBehaviours: options.contractBehaviours ?? CONTRACT,
      finish: 'finish',
    },
    failures: options.failures ?? failures,
    parentResults: null,
  };
}

function messages(body: unknown): ProposerMessage[] {
  return [
    { role: 'system', content: 'You propose harness changes.' },
    { role: 'user', content: `Here is the request.\n\n\`\`\`json proposal-request\n${JSON.stringify(body, null, 2)}\n\`\`\`\n` },
  ];
}

function ask(direction: Direction, options: RequestOptions = {}): string {
  return answerProposalRequest(messages(request(direction, options)));
}

/** The spec of an answer's last ```json block, as the workflow reads it. */
function specOf(answer: string): SimHarness {
  const blocks = [...answer.matchAll(/```json\n([\s\S]*?)\n```/g)];
  expect(blocks.length).toBeGreaterThan(0);
  return SimHarness.parse(JSON.parse(blocks.at(-1)![1]).spec);
}

/** The fields a move may change, and the rest of the spec (which must be the parent's). */
function effects(h: SimHarness) {
  return {
    hints: h.hints,
    avoid: h.avoid,
    formatHint: h.formatHint,
    performs: h.scaffold.performs,
    repairFormat: h.scaffold.repairFormat,
    extraTurns: h.extraTurns,
  };
}

function child(id: string, direction: Direction, fields: Partial<SimHarness>): SimHarness {
  return SimHarness.parse({ ...base, id, parent: 'base', direction, ...fields });
}

test('the sim proposer is served as model sim-proposer', () => {
  expect(SIM_PROPOSER_MODEL).toBe('sim-proposer');
});

describe("each direction's first answer changes only that direction's fields and keeps the direction", () => {
  test.each([
    ['action_realization', { formatHint: true }],
    ['environment_contract', { hints: ['read_docs'] }],
    ['procedural_skill', { hints: ['verify', 'plan'] }],
    ['trajectory_regulation', { avoid: ['finish'], extraTurns: 2 }],
  ] as const)('%s', (direction, changed) => {
    const spec = specOf(ask(direction));
    expect(spec.direction).toBe(direction);
    expect(spec.parent).toBe('base');
    expect(effects(spec)).toEqual({ ...effects(base), ...changed });
  });
});

describe('the answer opens with a sentence of reasoning and its description says the SIMULATED proposer evolved it', () => {
  test('a focused direction names the focus kind, what its failures skipped, and the move', () => {
    const answer = ask('environment_contract');
    expect(answer.split('\n')[0]).toBe(
      '[SIMULATED proposer] environment_contract, slot 1: focus kind multi_step (3 of 5 failing trajectories), ' +
        'whose failures skipped contract behaviours read_docs 3/3, inspect_schema 1/3, so this candidate hints read_docs.',
    );
    expect(specOf(answer).description).toBe(
      "Evolved by the SIMULATED proposer (round 1, slot 1) from 'base' for its multi_step failures: hints read_docs.",
    );
  });

  test('action_realization and trajectory_regulation name what all failures skipped, and the move', () => {
    const answer = ask('action_realization');
    expect(answer.split('\n')[0]).toBe(
      '[SIMULATED proposer] action_realization, slot 1: failing trajectories skipped verify 5/5, read_docs 4/5, plan 4/5, inspect_schema 3/5, compute 3/5, ' +
        'so this candidate states the action format (formatHint).',
    );
    expect(specOf(answer).description).toBe(
      "Evolved by the SIMULATED proposer (round 1, slot 1) from 'base': states the action format (formatHint).",
    );
  });
});

describe('environment_contract and procedural_skill focus each slot on one task kind, so siblings repair different kinds', () => {
  test('kinds go by how many failures they have: slot 1 focuses on multi_step, slot 2 on lookup', () => {
    expect([1, 2].map((slot) => simProposal(messages(request('environment_contract', { slot }))))).toMatchObject([
      { kind: 'candidate', focusKind: 'multi_step' },
      { kind: 'candidate', focusKind: 'lookup' },
    ]);
  });

  test('kinds with as many failures each go in order of first appearance', () => {
    const twoEach = failures.slice(0, 4);
    expect([1, 2].map((slot) => simProposal(messages(request('environment_contract', { slot, failures: twoEach }))))).toMatchObject([
      { focusKind: 'lookup', spec: { hints: ['inspect_schema'] } },
      { focusKind: 'multi_step', spec: { hints: ['read_docs'] } },
    ]);
  });

  test('environment_contract hints the contract behaviour each focus kind skipped most', () => {
    const hints = [1, 2].map((slot) => specOf(ask('environment_contract', { slot })).hints);
    expect(hints).toEqual([['read_docs'], ['inspect_schema']]);
  });

  test('procedural_skill hints each focus kind its recipe: every procedural behaviour at least half its failures skipped, in rank order', () => {
    const hints = [1, 2].map((slot) => specOf(ask('procedural_skill', { slot })).hints);
    expect(hints).toEqual([
      ['verify', 'plan'],
      ['plan', 'compute', 'verify'],
    ]);
  });

  test('the two directions work with different behaviours: environment_contract never hints procedure, procedural_skill never the contract', () => {
    const ec = [1, 2, 3, 4].map((slot) => effects(specOf(ask('environment_contract', { slot }))));
    const ps = [1, 2].map((slot) => specOf(ask('procedural_skill', { slot })).hints);
    expect(ec.flatMap((e) => [...e.hints, ...e.performs]).every((b) => CONTRACT.includes(b))).toBe(true);
    expect(ps.flat().some((b) => CONTRACT.includes(b))).toBe(false);
  });

  test("environment_contract's second move for a kind has the harness perform the behaviour itself (scaffold.performs)", () => {
    const slots = [3, 4].map((slot) => simProposal(messages(request('environment_contract', { slot }))));
    expect(slots.map((p) => p.kind === 'candidate' && [p.focusKind, effects(p.spec)])).toEqual([
      ['multi_step', { ...effects(base), performs: ['read_docs'] }],
      ['lookup', { ...effects(base), performs: ['inspect_schema'] }],
    ]);
    expect(slots[0]).toMatchObject({ move: 'performs read_docs in the harness (scaffold.performs)' });
  });

  test("a slot whose focus kind's move an earlier slot gave (the same hints, in any order) takes the next kind's", () => {
    const lookupComputes = failures.map((f) =>
      f.kind === 'lookup' ? { ...f, turns: [{ role: 'assistant', content: 'Action: compute' }, ...f.turns] } : f,
    );
    const withApiCall = [
      ...lookupComputes,
      failing('api_call-001', 'wrong_answer', [
        { role: 'assistant', content: 'Action: plan' },
        { role: 'assistant', content: 'Action: finish' },
      ]),
    ];
    const [slot1, slot2] = [1, 2].map((slot) => simProposal(messages(request('procedural_skill', { slot, failures: withApiCall }))));
    expect(slot1).toMatchObject({ focusKind: 'multi_step', spec: { hints: ['verify', 'plan'] } });
    expect(slot2).toMatchObject({ focusKind: 'api_call', spec: { hints: ['compute', 'verify'] } });
    expect(slot2.text).toContain("focus kind api_call (1 of 6 failing trajectories; lookup's moves are taken by earlier slots)");
  });
});

describe('with contractBehaviours empty or absent, every behaviour is a contract behaviour (and every one procedure)', () => {
  const docsDone = child('ec-1', 'environment_contract', {
    hints: ['read_docs'],
    scaffold: { performs: ['read_docs'], repairFormat: false },
  });

  test('environment_contract goes on to verify after read_docs, where the contract list would give inspect_schema', () => {
    expect(specOf(ask('environment_contract', { parent: docsDone })).hints).toEqual(['read_docs', 'inspect_schema']);
    expect(specOf(ask('environment_contract', { parent: docsDone, contractBehaviours: [] })).hints).toEqual(['read_docs', 'verify']);
    const absent = { ...request('environment_contract', { parent: docsDone }), envFacts: { behaviours: BEHAVIOURS, finish: 'finish' } };
    expect(specOf(answerProposalRequest(messages(absent))).hints).toEqual(['read_docs', 'verify']);
  });

  test("procedural_skill's recipe includes the contract behaviours", () => {
    expect(specOf(ask('procedural_skill', { contractBehaviours: [] })).hints).toEqual(['read_docs', 'verify', 'plan']);
  });
});

describe('slots of one round give different candidates, in the documented order', () => {
  test('action_realization: format hint, then format repair, then both', () => {
    const specs = [1, 2, 3].map((slot) => specOf(ask('action_realization', { slot })));
    expect(specs.map((s) => [s.formatHint, s.scaffold.repairFormat])).toEqual([
      [true, false],
      [false, true],
      [true, true],
    ]);
  });

  test('environment_contract: each kind its hint, then each kind its behaviour performed by the harness', () => {
    const specs = [1, 2, 3, 4].map((slot) => effects(specOf(ask('environment_contract', { slot }))));
    expect(specs.map((s) => [s.hints, s.performs])).toEqual([
      [['read_docs'], []],
      [['inspect_schema'], []],
      [[], ['read_docs']],
      [[], ['inspect_schema']],
    ]);
  });

  test('trajectory_regulation: avoid finish with more turns, avoid finish alone, more turns with a verify hint', () => {
    const specs = [1, 2, 3].map((slot) => effects(specOf(ask('trajectory_regulation', { slot }))));
    expect(specs).toEqual([
      { ...effects(base), avoid: ['finish'], extraTurns: 2 },
      { ...effects(base), avoid: ['finish'] },
      { ...effects(base), hints: ['verify'], extraTurns: 2 },
    ]);
  });

  test("trajectory_regulation's last move only adds turns in a world without verify", () => {
    const spec = specOf(
      ask('trajectory_regulation', { slot: 3, behaviours: ['inspect_schema', 'plan'], contractBehaviours: ['inspect_schema'] }),
    );
    expect(effects(spec)).toEqual({ ...effects(base), extraTurns: 2 });
  });
});

describe('a child of a parent that already has a move gets the next one', () => {
  test('action_realization: a parent with the format hint gets the repair next (keeping its hint)', () => {
    const parent = child('ar-1', 'action_realization', { formatHint: true });
    const spec = specOf(ask('action_realization', { parent }));
    expect(spec.parent).toBe('ar-1');
    expect([spec.formatHint, spec.scaffold.repairFormat]).toEqual([true, true]);
  });

  test('environment_contract: a parent hinting read_docs has the harness perform read_docs next', () => {
    const parent = child('ec-1', 'environment_contract', { hints: ['read_docs'] });
    const spec = specOf(ask('environment_contract', { parent }));
    expect([spec.hints, spec.scaffold.performs]).toEqual([['read_docs'], ['read_docs']]);
  });

  test("environment_contract: a parent hinting and performing read_docs gets the next-ranked contract behaviour's hint", () => {
    const parent = child('ec-2', 'environment_contract', {
      hints: ['read_docs'],
      scaffold: { performs: ['read_docs'], repairFormat: false },
    });
    expect(effects(specOf(ask('environment_contract', { parent })))).toEqual({
      ...effects(parent),
      hints: ['read_docs', 'inspect_schema'],
    });
  });

  test('procedural_skill: a parent hinting verify gets the rest of the recipe', () => {
    const parent = child('ps-1', 'procedural_skill', { hints: ['verify'] });
    expect(specOf(ask('procedural_skill', { parent })).hints).toEqual(['verify', 'plan']);
  });

  test('procedural_skill: when no behaviour left was skipped by half the kind, the recipe is the top-ranked one', () => {
    const parent = child('ps-2', 'procedural_skill', { hints: ['verify', 'plan'] });
    expect(specOf(ask('procedural_skill', { parent })).hints).toEqual(['verify', 'plan', 'compute']);
  });

  test('trajectory_regulation: a parent that already avoids finish skips the move that would only avoid finish', () => {
    const parent = child('tr-1', 'trajectory_regulation', { avoid: ['finish'] });
    const slot2 = effects(specOf(ask('trajectory_regulation', { parent, slot: 2 })));
    expect(slot2).toEqual({ ...effects(parent), hints: ['verify'], extraTurns: 2 });
  });
});

describe('with no move left, it answers plain text with no json block, saying why', () => {
  test('an action_realization parent that already states and repairs the format', () => {
    const parent = child('ar-2', 'action_realization', { formatHint: true, scaffold: { performs: [], repairFormat: true } });
    const answer = ask('action_realization', { parent });
    expect(answer).not.toContain('```');
    expect(answer).toBe(
      "[SIMULATED proposer] No candidate: no action_realization move is left for slot 1 of round 1: only 0 move(s) of the search change parent 'ar-2'.",
    );
  });

  test('a slot past the last environment_contract move', () => {
    const answer = ask('environment_contract', { slot: 5 });
    expect(answer).not.toContain('```');
    expect(answer).toBe(
      '[SIMULATED proposer] No candidate: no environment_contract move is left for slot 5 of round 1: ' +
        "only 4 move(s) of the search change parent 'base' for the failing kinds multi_step, lookup (contract behaviours: inspect_schema, read_docs).",
    );
  });

  test('a slot past the last kind for procedural_skill, which has one recipe per kind', () => {
    expect(ask('procedural_skill', { slot: 3 })).toContain('only 2 move(s)');
  });

  test('a procedural_skill parent that hints every procedural behaviour', () => {
    const parent = child('ps-3', 'procedural_skill', { hints: ['plan', 'compute', 'verify'] });
    const answer = ask('procedural_skill', { parent });
    expect(answer).not.toContain('```');
    expect(answer).toContain('(procedural behaviours: plan, compute, verify)');
  });

  test.each(['environment_contract', 'procedural_skill'] as const)('%s with no failures to focus on', (direction) => {
    const answer = ask(direction, { failures: [] });
    expect(answer).not.toContain('```');
    expect(answer).toContain('no failing trajectories were given, so there is no task kind to focus on');
  });
});

describe('an unreadable request is answered in plain text saying what is wrong', () => {
  test.each([
    ['no request block', [{ role: 'user', content: 'Propose a harness, please.' }], 'no ```json proposal-request block'],
    ['a block that is not JSON', [{ role: 'user', content: '```json proposal-request\n{"env": "sim",\n```' }], 'its block is not JSON'],
    ['another env', messages({ ...request('environment_contract'), env: 'dbbench' }), "env: this proposer only answers for env 'sim'"],
    [
      'the base direction',
      messages({ ...request('environment_contract'), direction: 'base' }),
      'direction: expected a repair direction (not base)',
    ],
    ['no behaviours', messages({ ...request('environment_contract'), envFacts: {} }), 'envFacts.behaviours'],
    [
      'a contract behaviour that is not a behaviour',
      messages({ ...request('environment_contract'), envFacts: { behaviours: BEHAVIOURS, contractBehaviours: ['teleport'] } }),
      "envFacts.contractBehaviours.0: unknown behaviour 'teleport'",
    ],
    ['no user message', [{ role: 'system', content: 'hello' }], 'there is no user message'],
  ])('%s', (_, conversation, problem) => {
    const answer = answerProposalRequest(conversation);
    expect(answer).not.toContain('```json\n');
    expect(answer).toContain('[SIMULATED proposer] No candidate: the proposal request cannot be read');
    expect(answer).toContain(problem);
  });
});

test('after a refusal it reads the request from the earlier user message and gives the same answer', () => {
  const first = messages(request('procedural_skill', { slot: 2 }));
  const answer = answerProposalRequest(first);
  const retried = [
    ...first,
    { role: 'assistant', content: answer },
    { role: 'user', content: 'Your answer was refused: direction must be procedural_skill.' },
  ];
  expect(answerProposalRequest(retried)).toBe(answer);
});

test('the last request block of the message counts', () => {
  const [system, user] = messages(request('environment_contract', { slot: 1 }));
  const later = messages(request('environment_contract', { slot: 2 }))[1].content;
  expect(specOf(answerProposalRequest([system, { role: 'user', content: `${user.content}\n${later}` }])).hints).toEqual(['inspect_schema']);
});

test('the same request always gets the same answer', () => {
  for (const direction of ['action_realization', 'environment_contract', 'procedural_skill', 'trajectory_regulation'] as const) {
    for (const slot of [1, 2, 3]) expect(ask(direction, { slot })).toBe(ask(direction, { slot }));
  }
});

test('simProposal tells a candidate from a refusal to propose, with the same answer text', () => {
  const proposal = simProposal(messages(request('environment_contract', { slot: 2 })));
  expect(proposal).toMatchObject({ kind: 'candidate', move: 'hints inspect_schema', focusKind: 'lookup' });
  expect(simProposal(messages(request('action_realization')))).toMatchObject({ kind: 'candidate', focusKind: null });
  expect(simProposal(messages(request('environment_contract', { slot: 9 })))).toMatchObject({ kind: 'declined' });
});
