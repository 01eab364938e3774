import { readdirSync } from 'node:fs';
import path from 'node:path';
import { HarnessSpecError, loadHarnessPool, parseHarnessSpec, specVersion } from '../../core/harness/spec';
import { applyRepairs, specHarness } from '../../core/harness/spec-harness';
import type { TurnContext } from '../../core/harness/harness';

const POOL_DIR = path.resolve(__dirname, '../../core/envs/dbbench/harnesses');
const poolFiles = readdirSync(POOL_DIR).map((f) => path.join(POOL_DIR, f));
const ctx = (overrides: Partial<TurnContext> = {}): TurnContext => ({
  turn: 0,
  budget: 5,
  previousActions: [],
  lastObservationKind: null,
  ...overrides,
});

test('the DBBench pool loads: one base harness first and a sibling for each repair direction', () => {
  const pool = loadHarnessPool(poolFiles);
  expect(pool[0].spec.direction).toBe('base');
  expect(new Set(pool.slice(1).map((p) => p.spec.direction))).toEqual(
    new Set(['action_realization', 'environment_contract', 'trajectory_regulation', 'procedural_skill']),
  );
  expect(pool.every((p) => /^[0-9a-f]{12}$/.test(p.version))).toBe(true);
});

test('an invalid spec is refused with the path of each bad field', () => {
  const text = JSON.stringify({
    id: 'Bad Id',
    parent: null,
    direction: 'sideways',
    description: 'x',
    env: 'dbbench',
    budget: { extraTurns: -1 },
    actions: { reject: [{ pattern: '(', feedback: 'no' }] },
  });
  expect(() => parseHarnessSpec(text, 'bad.json')).toThrow(HarnessSpecError);
  try {
    parseHarnessSpec(text, 'bad.json');
  } catch (err) {
    const message = (err as Error).message;
    for (const field of ['id:', 'direction:', 'budget.extraTurns:', 'actions.reject.0.pattern:']) expect(message).toContain(field);
  }
});

test('YAML and JSON of the same spec have the same content-hash version, and a change gives a new one', () => {
  const spec = { id: 'x', parent: null, direction: 'base', description: 'd', env: 'dbbench' };
  const fromJson = parseHarnessSpec(JSON.stringify(spec), 'x.json');
  const fromYaml = parseHarnessSpec('id: x\nparent: null\ndirection: base\ndescription: d\nenv: dbbench\n', 'x.yaml');
  expect(fromYaml.version).toBe(fromJson.version);
  expect(specVersion({ ...fromJson.spec, description: 'other' })).not.toBe(fromJson.version);
});

test('format repairs turn near-miss replies into the protocol the env parses', () => {
  expect(applyRepairs('```sql\nSELECT 1\n```', ['add_missing_operation_line']).text).toBe('Action: Operation\n```sql\nSELECT 1\n```');
  expect(applyRepairs('Final Answer: ["a"]', ['add_missing_answer_line']).text).toBe('Action: Answer\nFinal Answer: ["a"]');
  expect(applyRepairs('SELECT * FROM t', ['wrap_bare_sql']).text).toBe('Action: Operation\n```sql\nSELECT * FROM t\n```');
  expect(applyRepairs('Action: Operation\n```sql\nSELECT 1\n```\nAction: Answer\nFinal Answer: [1]', ['keep_last_action']).text).toBe(
    'Action: Answer\nFinal Answer: [1]',
  );
  expect(applyRepairs('Action: Answer\nFinal Answer: [1]', ['add_missing_answer_line', 'wrap_bare_sql'])).toEqual({
    text: 'Action: Answer\nFinal Answer: [1]',
    repaired: false,
  });
});

test('the finish guard refuses an answer before any operation, with feedback, and accepts it after one', () => {
  const pool = loadHarnessPool(poolFiles);
  const harness = specHarness(
    pool.find((p) => p.spec.id === 'tr-verify-budget')!,
    'env prompt',
  );
  const early = harness.realizeAction('Action: Answer\nFinal Answer: [1]', ctx());
  expect(early).toMatchObject({ ok: false, retry: true });
  const later = harness.realizeAction(
    'Action: Answer\nFinal Answer: [1]',
    ctx({ previousActions: ['Action: Operation\n```sql\nSELECT 1\n```'] }),
  );
  expect(later).toMatchObject({ ok: true });
  expect(harness.turnBudget(15)).toBe(18);
});

test('observations are annotated on errors and get the hints whose moment has come', () => {
  const pool = loadHarnessPool(poolFiles);
  const contract = specHarness(
    pool.find((p) => p.spec.id === 'ec-mysql-contract')!,
    'env prompt',
  );
  expect(contract.shapeObservation("1054 (42S22): Unknown column 'x' in 'field list'", ctx())).toMatch(
    /Note: copy table and column names exactly/,
  );
  expect(contract.systemPrompt({ taskId: 't', kind: 'k' })).toMatch(/^env prompt\n\n.*backticks/s);
  const budget = specHarness(
    pool.find((p) => p.spec.id === 'tr-verify-budget')!,
    '',
  );
  expect(budget.shapeObservation('[]', ctx({ turn: 4, budget: 5 }))).toMatch(/last round/);
  expect(budget.shapeObservation('[]', ctx({ turn: 2, budget: 5 }))).toBe('[]');
});

test('the base harness changes nothing: the env prompt, the text as written, the observation as given', () => {
  const pool = loadHarnessPool(poolFiles);
  const base = specHarness(pool[0], 'env prompt');
  expect(base.systemPrompt({ taskId: 't', kind: 'k' })).toBe('env prompt');
  expect(base.realizeAction('```sql\nSELECT 1\n```', ctx())).toEqual({ ok: true, action: '```sql\nSELECT 1\n```', repaired: false });
  expect(base.shapeObservation('x'.repeat(900), ctx())).toBe('x'.repeat(900));
  expect(base.turnBudget(15)).toBe(15);
});
