/**
 * The SIMULATED policy: a small parametric model over agent behaviours that
 * reads a token prefix and predicts the next token. Pure: no I/O, no clock;
 * randomness comes in as a function.
 *
 * One assistant turn is exactly three tokens: a format token (`Action:` well
 * formed, `Maybe:` malformed), a behaviour-or-`finish` token, then `<|end|>`.
 *
 *   format slot:    softmax([formatLogit[kind] + formatHintStrength * #`Hint: Action:`, 0]) over [Action:, Maybe:]
 *   behaviour slot: softmax_a(behaviourLogit[kind][prev][a] + hintStrength * (#`Hint: a` * [a not done yet] - #`Avoid: a`))
 *
 * A hint reads as "do a": once a has been done in the episode the hint is
 * satisfied and no longer pulls (a prompted recipe does not make the agent loop).
 *   end slot:       `<|end|>` with probability 1
 *
 * Context read from the prefix (see `readContext`): the task kind, the
 * policy's own previous action (or `harness` right after scaffolded work: a
 * context the base harness never shows, so what is learned there does not
 * carry over to it), and the hint lines of the system message. Hints carry
 * no parameters: they are the harness's prompt, so training can only learn
 * to do without them by moving `behaviourLogit`/`formatLogit`.
 */
import { z } from 'zod';
import { mulberry32 } from '../../random';
import type { SimWorld } from './world';
import { FINISH } from './world';
import { ACTION, ASSISTANT, AVOID, END, HINT, MAYBE, SYSTEM, SimTokenizer, USER } from './tokenizer';

/** The `prev` of a turn that follows no behaviour yet. */
export const NO_PREVIOUS = 'none';
/** The `prev` right after work the harness did itself (scaffolded): a context the base harness never shows. */
export const AFTER_HARNESS = 'harness';

export const PolicyParams = z.object({
  /** Per kind: logit of `Action:` against `Maybe:` (whose logit is 0). */
  formatLogit: z.record(z.string(), z.number()),
  /** Per kind, per previous behaviour (or 'none'), per action: logit. */
  behaviourLogit: z.record(z.string(), z.record(z.string(), z.record(z.string(), z.number()))),
});
export type PolicyParams = z.infer<typeof PolicyParams>;

/** A caller's mistake in the prompt (e.g. no task kind); servers answer it with HTTP 400. */
export class SimPolicyInputError extends Error {}

export type Slot = 'format' | 'behaviour' | 'end';

export interface PolicyContext {
  kind: string;
  /** The last behaviour (or `finish`) seen after the first user message started; 'none' if there is none. */
  prev: string;
  /** Every behaviour (or `finish`) seen after the first user message started. */
  done: string[];
  /** Per action: the number of `Hint: <action>` pairs in system messages. */
  hints: Record<string, number>;
  /** Per action: the number of `Avoid: <action>` pairs in system messages. */
  avoids: Record<string, number>;
  /** The number of `Hint: Action:` pairs in system messages. */
  formatHints: number;
}

/** The next-token distribution at a position, over its support only (every other token has probability 0). */
export interface SlotDistribution {
  slot: Slot;
  tokenIds: number[];
  logits: number[];
}

/** The gradient of one log-prob: it touches one format logit, one behaviour row, or nothing. */
export type SparseGradient =
  | { type: 'none' }
  | { type: 'formatLogit'; kind: string; value: number }
  | { type: 'behaviourLogit'; kind: string; prev: string; row: Record<string, number> };

export interface TokenLogprob {
  id: number;
  logprob: number;
}

export interface GeneratedToken extends TokenLogprob {
  /** The whole support at this position, most likely first (at temperature 1). */
  alternatives: TokenLogprob[];
}

export interface GenerateOptions {
  /** Divides the logits; 0 picks the most likely token. */
  temperature: number;
  maxTokens: number;
  /** Uniform in [0, 1). */
  random: () => number;
}

/** `['none', ...behaviours, 'finish']`: every value `prev` can take. */
export function previousOptions(world: SimWorld): string[] {
  return [NO_PREVIOUS, AFTER_HARNESS, ...world.behaviours, FINISH];
}

/**
 * The untrained policy: formatLogit from world.model.init.formatLogit (0 when
 * absent); behaviourLogit[k][prev][a] = propensity[k][a] (0 when absent),
 * minus repeatPenalty when prev === a.
 */
export function initialParams(world: SimWorld): PolicyParams {
  const { init } = world.model;
  const actions = [...world.behaviours, FINISH];
  const params: PolicyParams = { formatLogit: {}, behaviourLogit: {} };
  for (const { name: kind } of world.kinds) {
    params.formatLogit[kind] = init.formatLogit[kind] ?? 0;
    params.behaviourLogit[kind] = {};
    for (const prev of previousOptions(world)) {
      params.behaviourLogit[kind][prev] = Object.fromEntries(
        actions.map((a) => [a, (init.propensity[kind]?.[a] ?? 0) - (prev === a ? init.repeatPenalty : 0)]),
      );
    }
  }
  return params;
}

/** log softmax, stable for large logits. */
export function logSoftmax(logits: readonly number[]): number[] {
  const max = Math.max(...logits);
  const logZ = max + Math.log(logits.reduce((sum, l) => sum + Math.exp(l - max), 0));
  return logits.map((l) => l - logZ);
}

/**
 * The generator for a request with a `seed`: the same seed and prompt length
 * always give the same stream, so a seeded request is reproducible.
 */
export function seededRandom(seed: number, promptLength: number): () => number {
  let h = 0x811c9dc5;
  for (const ch of `${seed}:${promptLength}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193);
  return mulberry32(h);
}

/** Index drawn from softmax(logits / temperature); temperature 0 is argmax (first on ties). */
export function sampleIndex(logits: readonly number[], temperature: number, random: () => number): number {
  if (temperature === 0) return logits.indexOf(Math.max(...logits));
  const probs = logSoftmax(logits.map((l) => l / temperature)).map(Math.exp);
  let u = random();
  for (let i = 0; i < probs.length; i++) {
    u -= probs[i];
    if (u < 0) return i;
  }
  return probs.length - 1; // u landed in the rounding error at the top
}

export class SimPolicyModel {
  readonly tokenizer: SimTokenizer;
  private readonly world: SimWorld;
  private readonly ids: {
    assistant: number;
    user: number;
    system: number;
    end: number;
    action: number;
    maybe: number;
    hint: number;
    avoid: number;
  };

  constructor(world: SimWorld) {
    this.world = world;
    this.tokenizer = new SimTokenizer(world);
    const t = this.tokenizer;
    this.ids = {
      assistant: t.id(ASSISTANT),
      user: t.id(USER),
      system: t.id(SYSTEM),
      end: t.id(END),
      action: t.id(ACTION),
      maybe: t.id(MAYBE),
      hint: t.id(HINT),
      avoid: t.id(AVOID),
    };
  }

  initialParams(): PolicyParams {
    return initialParams(this.world);
  }

  /** Parameters of the world's shape with every value 0 (gradient buffers, Adam moments). */
  zeroParams(): PolicyParams {
    return this.unflatten(new Array<number>(this.parameterCount()).fill(0));
  }

  parameterCount(): number {
    const kinds = this.world.kinds.length;
    return kinds + kinds * previousOptions(this.world).length * this.tokenizer.actions.length;
  }

  /**
   * All parameters as one vector in world order (format logits by kind, then
   * behaviour logits by kind, prev, action), for dense optimisers. Throws when
   * `params` lacks an entry the world has (it was made for another world).
   */
  flatten(params: PolicyParams): number[] {
    const values: number[] = [];
    const take = (value: number | undefined, where: string) => {
      if (value === undefined) throw new Error(`policy params have no ${where}; were they made for another sim world?`);
      values.push(value);
    };
    for (const { name: kind } of this.world.kinds) take(params.formatLogit[kind], `formatLogit.${kind}`);
    this.forEachBehaviourEntry((kind, prev, action) =>
      take(params.behaviourLogit[kind]?.[prev]?.[action], `behaviourLogit.${kind}.${prev}.${action}`),
    );
    return values;
  }

  unflatten(values: readonly number[]): PolicyParams {
    if (values.length !== this.parameterCount()) {
      throw new Error(`expected ${this.parameterCount()} parameter values, got ${values.length}`);
    }
    let i = 0;
    const params: PolicyParams = { formatLogit: {}, behaviourLogit: {} };
    for (const { name: kind } of this.world.kinds) params.formatLogit[kind] = values[i++];
    this.forEachBehaviourEntry((kind, prev, action) => {
      const rows = (params.behaviourLogit[kind] ??= {});
      (rows[prev] ??= {})[action] = values[i++];
    });
    return params;
  }

  /** Which slot the token after `prefixIds` fills (see the module comment). */
  slotAt(prefixIds: readonly number[]): Slot {
    const n = prefixIds.length;
    if (n >= 1 && prefixIds[n - 1] === this.ids.assistant) return 'format';
    const formatToken = prefixIds[n - 1] === this.ids.action || prefixIds[n - 1] === this.ids.maybe;
    if (n >= 2 && formatToken && prefixIds[n - 2] === this.ids.assistant) return 'behaviour';
    return 'end';
  }

  /**
   * Reads the policy's context off a token prefix:
   * - kind: the first kind token after the first `<|user|>`;
   * - prev: the behaviour/`finish` of the policy's last assistant turn, or
   *   'harness' when a later user message says the harness did something
   *   (`... done by harness`); 'none' before either;
   * - done: every behaviour the policy or the harness has done;
   * - hints: `Hint: <action>`, `Avoid: <action>` and `Hint: Action:` token
   *   pairs inside system messages (from `<|system|>` to its `<|end|>`).
   * Throws SimPolicyInputError when there is no user message or it names no kind.
   */
  readContext(prefixIds: readonly number[]): PolicyContext {
    const firstUser = prefixIds.indexOf(this.ids.user);
    if (firstUser < 0) {
      throw new SimPolicyInputError('the prompt has no user message; the first user message must be the task line');
    }
    const kindIndex = prefixIds.findIndex((id, i) => i > firstUser && this.tokenizer.isKind(id));
    if (kindIndex < 0) {
      throw new SimPolicyInputError(
        `the first user message names no task kind; expected "[SIMULATED] Task <id> kind <kind>: <goal>" ` +
          `with <kind> one of ${this.tokenizer.kinds.join(', ')}`,
      );
    }
    // prev: the policy's own last action, or AFTER_HARNESS when the harness acted since.
    // Observations echoing the policy's own actions change nothing.
    let prev = NO_PREVIOUS;
    const done = new Set<string>();
    let role: number | null = null;
    let messageActions: string[] = [];
    const byHarness = (i: number) =>
      this.tokenizer.token(prefixIds[i]) === 'by' && this.tokenizer.token(prefixIds[i + 1] ?? -1) === 'harness';
    let harnessMessage = false;
    for (let i = firstUser; i < prefixIds.length; i++) {
      const id = prefixIds[i];
      if (id === this.ids.user || id === this.ids.assistant || id === this.ids.system) {
        role = id;
        messageActions = [];
        harnessMessage = false;
        continue;
      }
      if (id === this.ids.end) {
        if (role === this.ids.user && harnessMessage && messageActions.length > 0) {
          prev = AFTER_HARNESS;
          for (const a of messageActions) done.add(a);
        }
        role = null;
        continue;
      }
      if (i === kindIndex || role === null) continue;
      if (role === this.ids.user && i + 1 < prefixIds.length && byHarness(i)) harnessMessage = true;
      if (!this.tokenizer.isAction(id)) continue;
      const action = this.tokenizer.token(id);
      if (role === this.ids.assistant) {
        prev = action;
        done.add(action);
      } else if (role === this.ids.user) {
        messageActions.push(action);
      }
    }
    return { kind: this.tokenizer.token(prefixIds[kindIndex]), prev, done: [...done], ...this.readHints(prefixIds) };
  }

  /** The next-token distribution after `prefixIds`, at temperature 1. */
  logitsAt(params: PolicyParams, prefixIds: readonly number[]): SlotDistribution {
    const slot = this.slotAt(prefixIds);
    if (slot === 'end') return { slot, tokenIds: [this.ids.end], logits: [0] };
    const context = this.readContext(prefixIds);
    if (slot === 'format') {
      const formatLogit = this.formatLogit(params, context.kind);
      const hinted = formatLogit + this.world.model.formatHintStrength * context.formatHints;
      return { slot, tokenIds: [this.ids.action, this.ids.maybe], logits: [hinted, 0] };
    }
    const row = this.behaviourRow(params, context.kind, context.prev);
    const { hintStrength } = this.world.model;
    return {
      slot,
      tokenIds: this.tokenizer.actions.map((a) => this.tokenizer.id(a)),
      logits: this.tokenizer.actions.map(
        (a) => row[a] + hintStrength * ((context.done.includes(a) ? 0 : (context.hints[a] ?? 0)) - (context.avoids[a] ?? 0)),
      ),
    };
  }

  /**
   * log p(target | prefix) and its gradient with respect to the parameters.
   * d log softmax_i / d logit_j = [i = j] - p_j; only the format logit
   * (the `Action:` entry) or one behaviour row is touched. A target outside
   * the slot's support has log-prob -Infinity and no gradient.
   */
  logprobAndGrad(params: PolicyParams, prefixIds: readonly number[], target: number): { logprob: number; grad: SparseGradient } {
    const dist = this.logitsAt(params, prefixIds);
    const index = dist.tokenIds.indexOf(target);
    if (index < 0) return { logprob: -Infinity, grad: { type: 'none' } };
    const logprobs = logSoftmax(dist.logits);
    const dLogits = logprobs.map((lp, j) => (j === index ? 1 : 0) - Math.exp(lp));
    if (dist.slot === 'end') return { logprob: logprobs[index], grad: { type: 'none' } };
    const context = this.readContext(prefixIds);
    if (dist.slot === 'format') {
      // Only the `Action:` logit is a parameter; `Maybe:` is pinned at 0.
      return { logprob: logprobs[index], grad: { type: 'formatLogit', kind: context.kind, value: dLogits[0] } };
    }
    const row = Object.fromEntries(this.tokenizer.actions.map((a, j) => [a, dLogits[j]]));
    return { logprob: logprobs[index], grad: { type: 'behaviourLogit', kind: context.kind, prev: context.prev, row } };
  }

  /**
   * Continues `promptIds` with one assistant turn (at most `maxTokens`
   * tokens, stopping after `<|end|>`). The reported log-probs are at
   * temperature 1 whatever the sampling temperature, as vLLM's default
   * (raw) logprobs are, so they match what the trainer recomputes.
   */
  generate(params: PolicyParams, promptIds: readonly number[], options: GenerateOptions): GeneratedToken[] {
    const generated: GeneratedToken[] = [];
    const prefix = [...promptIds];
    while (generated.length < options.maxTokens) {
      const dist = this.logitsAt(params, prefix);
      const logprobs = logSoftmax(dist.logits);
      const index = sampleIndex(dist.logits, options.temperature, options.random);
      const alternatives = dist.tokenIds.map((id, j) => ({ id, logprob: logprobs[j] })).sort((a, b) => b.logprob - a.logprob);
      generated.push({ id: dist.tokenIds[index], logprob: logprobs[index], alternatives });
      prefix.push(dist.tokenIds[index]);
      if (dist.tokenIds[index] === this.ids.end) break;
    }
    return generated;
  }

  private readHints(prefixIds: readonly number[]): Pick<PolicyContext, 'hints' | 'avoids' | 'formatHints'> {
    const hints: Record<string, number> = {};
    const avoids: Record<string, number> = {};
    let formatHints = 0;
    let inSystem = false;
    for (let i = 0; i < prefixIds.length; i++) {
      const id = prefixIds[i];
      if (id === this.ids.system) inSystem = true;
      else if (id === this.ids.end) inSystem = false;
      if (!inSystem || i + 1 >= prefixIds.length) continue;
      const next = prefixIds[i + 1];
      const nextIsAction = this.tokenizer.isAction(next);
      if (id === this.ids.hint && next === this.ids.action) formatHints++;
      else if (id === this.ids.hint && nextIsAction) increment(hints, this.tokenizer.token(next));
      else if (id === this.ids.avoid && nextIsAction) increment(avoids, this.tokenizer.token(next));
    }
    return { hints, avoids, formatHints };
  }

  private formatLogit(params: PolicyParams, kind: string): number {
    const value = params.formatLogit[kind];
    if (value === undefined) throw new Error(`policy params have no formatLogit for kind '${kind}'`);
    return value;
  }

  private behaviourRow(params: PolicyParams, kind: string, prev: string): Record<string, number> {
    const row = params.behaviourLogit[kind]?.[prev];
    if (row === undefined) throw new Error(`policy params have no behaviourLogit row for kind '${kind}' after '${prev}'`);
    return row;
  }

  private forEachBehaviourEntry(visit: (kind: string, prev: string, action: string) => void): void {
    for (const { name: kind } of this.world.kinds) {
      for (const prev of previousOptions(this.world)) {
        for (const action of this.tokenizer.actions) visit(kind, prev, action);
      }
    }
  }
}

/** acc += scale * grad, in place (a gradient buffer of the params' shape). */
export function addGradient(acc: PolicyParams, grad: SparseGradient, scale: number): void {
  if (grad.type === 'formatLogit') {
    acc.formatLogit[grad.kind] += scale * grad.value;
  } else if (grad.type === 'behaviourLogit') {
    const row = acc.behaviourLogit[grad.kind][grad.prev];
    for (const [action, value] of Object.entries(grad.row)) row[action] += scale * value;
  }
}

function increment(counts: Record<string, number>, key: string): void {
  counts[key] = (counts[key] ?? 0) + 1;
}
