import {
  type PolicyParams,
  SimPolicyInputError,
  SimPolicyModel,
  addGradient,
  initialParams,
  logSoftmax,
  seededRandom,
} from '../../core/envs/sim/policy-model';
import type { ChatMessage } from '../../core/envs/sim/tokenizer';
import { mulberry32 } from '../../core/random';
import { loadSimWorld } from '../../core/envs/sim/world';

const world = loadSimWorld();
const model = new SimPolicyModel(world);
const tokenizer = model.tokenizer;

const task = (kind: string): ChatMessage => ({ role: 'user', content: `[SIMULATED] Task t-1 kind ${kind}: do the thing` });
const system = (...lines: string[]): ChatMessage => ({ role: 'system', content: ['You are a SIMULATED agent.', ...lines].join('\n') });

/** The prompt, optionally followed by the format token so the next slot is the behaviour slot. */
function prefix(messages: ChatMessage[], format?: 'Action:' | 'Maybe:'): number[] {
  const ids = tokenizer.renderPrompt(messages);
  return format ? [...ids, tokenizer.id(format)] : ids;
}

function probabilities(params: PolicyParams, ids: number[]): Map<string, number> {
  const dist = model.logitsAt(params, ids);
  const logprobs = logSoftmax(dist.logits);
  return new Map(dist.tokenIds.map((id, j) => [tokenizer.token(id), Math.exp(logprobs[j])]));
}

/** Initial params with every entry nudged, so no gradient is zero by symmetry. */
function jitteredParams(): PolicyParams {
  const random = mulberry32(7);
  return model.unflatten(model.flatten(initialParams(world)).map((v) => v + random() - 0.5));
}

describe('sim policy model', () => {
  it('starts from the world: propensity, minus the repeat penalty right after the same behaviour', () => {
    const params = initialParams(world);
    const { init } = world.model;
    expect(params.formatLogit.api_call).toBe(init.formatLogit.api_call);
    expect(params.behaviourLogit.lookup.none.inspect_schema).toBe(init.propensity.lookup.inspect_schema);
    expect(params.behaviourLogit.lookup.inspect_schema.inspect_schema).toBe(init.propensity.lookup.inspect_schema - init.repeatPenalty);
    expect(params.behaviourLogit.lookup.none.plan).toBe(0);
  });

  it('stops pulling towards a hinted behaviour once the episode has done it', () => {
    const params = initialParams(world);
    const afterVerify = (lines: string[]) =>
      probabilities(
        params,
        prefix(
          [
            system(...lines),
            task('multi_step'),
            { role: 'assistant', content: 'Action: verify' },
            { role: 'user', content: 'Observation: verify done' },
            { role: 'assistant', content: 'Action: plan' },
            { role: 'user', content: 'Observation: plan done' },
          ],
          'Action:',
        ),
      );
    // verify was done earlier (prev is plan): its hint no longer changes its probability.
    expect(afterVerify(['Hint: verify']).get('verify')).toBeCloseTo(afterVerify([]).get('verify')!, 12);
    // compute was not done: its hint still raises it.
    expect(afterVerify(['Hint: compute']).get('compute')!).toBeGreaterThan(afterVerify([]).get('compute')!);
  });

  it('gives probabilities that sum to 1 in the format slot and in the behaviour slot', () => {
    const params = jitteredParams();
    for (const ids of [prefix([system(), task('aggregate')]), prefix([system(), task('aggregate')], 'Action:')]) {
      const total = [...probabilities(params, ids).values()].reduce((a, b) => a + b, 0);
      expect(total).toBeCloseTo(1, 12);
    }
  });

  it('raises P(x) by exactly the softmax effect of hintStrength when the system message says `Hint: x`', () => {
    const params = initialParams(world);
    const plain = probabilities(params, prefix([system(), task('multi_step')], 'Action:'));
    const hinted = probabilities(params, prefix([system('Hint: verify'), task('multi_step')], 'Action:'));

    const row = params.behaviourLogit.multi_step.none;
    const boosted = Object.entries(row).map(([a, l]) => (a === 'verify' ? l + world.model.hintStrength : l));
    const expected = Math.exp(row.verify + world.model.hintStrength) / boosted.reduce((s, l) => s + Math.exp(l), 0);
    expect(hinted.get('verify')).toBeCloseTo(expected, 12);
    expect(hinted.get('verify')!).toBeGreaterThan(plain.get('verify')!);
  });

  it('lowers P(x) for `Avoid: x` and raises P(Action:) for `Hint: Action:`', () => {
    const params = initialParams(world);
    const plain = probabilities(params, prefix([system(), task('api_call')], 'Action:'));
    const avoided = probabilities(params, prefix([system('Avoid: finish'), task('api_call')], 'Action:'));
    expect(avoided.get('finish')!).toBeLessThan(plain.get('finish')!);

    const format = probabilities(params, prefix([system('Hint: Action:'), task('api_call')]));
    const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));
    expect(format.get('Action:')).toBeCloseTo(sigmoid(0.3 + world.model.formatHintStrength), 12);
  });

  it('reads hints only from the system message, and the previous behaviour from its own actions', () => {
    const ids = prefix([
      system('Hint: plan'),
      task('multi_step'),
      { role: 'assistant', content: 'Action: plan' },
      { role: 'user', content: 'Hint: verify Observation: plan done' },
    ]);
    const context = model.readContext(ids);
    expect(context).toMatchObject({ kind: 'multi_step', prev: 'plan', done: ['plan'], hints: { plan: 1 }, formatHints: 0 });
    expect(context.hints.verify).toBeUndefined();
  });

  it('after work the harness did itself, the context is one the base harness never shows', () => {
    const ids = prefix([system(), task('multi_step'), { role: 'user', content: 'Observation: compute done by harness' }]);
    expect(model.readContext(ids)).toMatchObject({ prev: 'harness', done: ['compute'] });
    const after = prefix([
      system(),
      task('multi_step'),
      { role: 'user', content: 'Observation: compute done by harness' },
      { role: 'assistant', content: 'Action: plan' },
    ]);
    expect(model.readContext(after)).toMatchObject({ prev: 'plan', done: expect.arrayContaining(['compute', 'plan']) });
  });

  it('matches a finite-difference gradient in the behaviour slot and in the format slot', () => {
    const params = jitteredParams();
    const cases = [
      {
        ids: prefix([system('Hint: compute'), task('aggregate'), { role: 'assistant', content: 'Action: inspect_schema' }], 'Maybe:'),
        target: 'compute',
      },
      { ids: prefix([system(), task('api_call')]), target: 'Maybe:' },
    ];
    for (const { ids, target } of cases) {
      const { grad } = model.logprobAndGrad(params, ids, tokenizer.id(target));
      const dense = model.zeroParams();
      addGradient(dense, grad, 1);
      const analytic = model.flatten(dense);
      const flat = model.flatten(params);

      const h = 1e-6;
      const numeric = flat.map((_, i) => {
        const at = (delta: number) => {
          const shifted = [...flat];
          shifted[i] += delta;
          return model.logprobAndGrad(model.unflatten(shifted), ids, tokenizer.id(target)).logprob;
        };
        return (at(h) - at(-h)) / (2 * h);
      });
      expect(numeric.some((g) => Math.abs(g) > 1e-3)).toBe(true);
      numeric.forEach((g, i) => expect(analytic[i]).toBeCloseTo(g, 6));
    }
  });

  it('forces <|end|> with log-prob 0 after the behaviour token', () => {
    const ids = [...prefix([system(), task('lookup')], 'Action:'), tokenizer.id('inspect_schema')];
    const dist = model.logitsAt(initialParams(world), ids);
    expect(dist.slot).toBe('end');
    expect(model.logprobAndGrad(initialParams(world), ids, tokenizer.id('<|end|>')).logprob).toBe(0);
  });

  it('samples the same turn again for the same seed, and different turns across seeds', () => {
    const params = initialParams(world);
    const ids = prefix([system(), task('multi_step')]);
    const turn = (seed: number) =>
      tokenizer.decode(
        model.generate(params, ids, { temperature: 1, maxTokens: 3, random: seededRandom(seed, ids.length) }).map((t) => t.id),
      );
    expect(turn(42)).toBe(turn(42));
    expect(turn(42)).toMatch(/^(Action:|Maybe:) \S+ <\|end\|>$/);
    expect(new Set(Array.from({ length: 50 }, (_, seed) => turn(seed))).size).toBeGreaterThan(1);
  });

  it('picks the most likely token at temperature 0', () => {
    const params = initialParams(world);
    const ids = prefix([system(), task('lookup')]);
    const turn = model.generate(params, ids, { temperature: 0, maxTokens: 3, random: Math.random });
    expect(tokenizer.decode(turn.map((t) => t.id))).toBe('Action: finish <|end|>');
  });

  it('refuses a prompt whose task line names no kind', () => {
    const ids = prefix([system(), { role: 'user', content: '[SIMULATED] Task t-1 kind cooking: bake bread' }]);
    expect(() => model.logitsAt(initialParams(world), ids)).toThrow(SimPolicyInputError);
    expect(() => model.logitsAt(initialParams(world), ids)).toThrow(/lookup, aggregate, multi_step, api_call/);
  });
});
