/**
 * The space candidates live in, per env: the env's harness spec format (the
 * declarative `HarnessSpec` here, which every spec-driven env shares; the
 * sim's `SimHarness` in core/envs/sim/harness-space.ts), its JSON Schema for proposers, which fields each repair direction
 * may change, and how a spec becomes a Harness the runtime drives.
 *
 * Field ownership (a candidate that changes a field its direction does not
 * own is refused as out of direction; `description` and `targets` are free):
 *   sim   action_realization    formatHint, scaffold.repairFormat
 *         environment_contract  hints, scaffold.performs
 *         trajectory_regulation extraTurns, avoid, hints
 *         procedural_skill      hints
 *   specs action_realization    actions.repairs, actions.reject, context.append
 *         environment_contract  context.append, observations.annotate, observations.maxChars
 *         trajectory_regulation budget.maxTurns, budget.extraTurns, budget.finishGuard, turnHints
 *         procedural_skill      context.append, turnHints
 * The sim also tells directions apart by what a hint names: its world marks
 * the behaviours that consult the environment (`contractBehaviours`).
 * environment_contract may add only those (as hints or performed by the
 * harness); procedural_skill and trajectory_regulation may hint only the
 * others. For specs, fields shared by directions (context.append, turnHints)
 * cannot be told apart by value: a proposer's direction is taken at its word
 * there.
 */
import { z } from 'zod';
import { contentHash } from '../harness/frozen-pool';
import type { Harness } from '../harness/harness';
import { HarnessSpec } from '../harness/spec';
import { specHarness } from '../harness/spec-harness';
import { UserError } from '../errors';
import { formatZodError } from '../zod-errors';
import type { SiblingDirection } from './failure-directions';

export class HarnessSpaceError extends UserError {
  override name = 'HarnessSpaceError';
}

export type SpecCheck = { ok: true; spec: Record<string, unknown> } | { ok: false; error: string };

export interface HarnessSpace {
  env: string;
  /** JSON Schema of a spec, for the proposer (built when a proposal is asked for, not for every rollout group). */
  jsonSchema(): unknown;
  /** Spec fields (dotted paths) each direction may change. */
  mayChange: Record<SiblingDirection, string[]>;
  /** Every field a candidate may differ from its parent in, by path. */
  fields: string[];
  /** What a proposer should know of the env besides the schema. */
  envFacts: Record<string, unknown>;
  /** Validates a spec (the schema, then the env's own rules); the parsed spec with defaults on success. */
  check(raw: unknown): SpecCheck;
  /** The runtime harness of a checked spec. */
  harness(spec: Record<string, unknown>): Harness;
  /** Why a checked candidate's additions belong to another direction than its own (value-level rules), or null. */
  directionProblem(direction: SiblingDirection, spec: Record<string, unknown>, parent: Record<string, unknown>): string | null;
}

export const FREE_FIELDS = ['description', 'targets'];

const SPEC_MAY_CHANGE: Record<SiblingDirection, string[]> = {
  action_realization: ['actions.repairs', 'actions.reject', 'context.append'],
  environment_contract: ['context.append', 'observations.annotate', 'observations.maxChars'],
  trajectory_regulation: ['budget.maxTurns', 'budget.extraTurns', 'budget.finishGuard', 'turnHints'],
  procedural_skill: ['context.append', 'turnHints'],
};

const SPEC_FIELDS = [
  ...FREE_FIELDS,
  'env',
  'context.systemPrompt',
  'context.append',
  'turnHints',
  'actions.repairs',
  'actions.reject',
  'observations.maxChars',
  'observations.annotate',
  'budget.maxTurns',
  'budget.extraTurns',
  'budget.finishGuard',
];

export function zodCheck<T extends z.ZodType>(schema: T, raw: unknown): { ok: true; spec: z.infer<T> } | { ok: false; error: string } {
  const parsed = schema.safeParse(raw);
  return parsed.success ? { ok: true, spec: parsed.data } : { ok: false, error: formatZodError(parsed.error, schema) };
}

/** The space of HarnessSpec files written for `env`, whose harnesses run on the env's system prompt. */
export function declarativeSpace(env: string, systemPrompt: string): HarnessSpace {
  return {
    env,
    jsonSchema: () => z.toJSONSchema(HarnessSpec, { io: 'input', unrepresentable: 'any' }),
    mayChange: SPEC_MAY_CHANGE,
    fields: SPEC_FIELDS,
    envFacts: {},
    check(raw) {
      const checked = zodCheck(HarnessSpec, raw);
      if (!checked.ok) return checked;
      if (checked.spec.env !== env)
        return { ok: false, error: `  - env: must be '${env}' (the env this pool is evolved for), not '${checked.spec.env}'` };
      return { ok: true, spec: checked.spec as unknown as Record<string, unknown> };
    },
    // On the env protocol's own system prompt, as the env's pool is.
    harness: (spec) =>
      specHarness({ spec: spec as unknown as HarnessSpec, version: contentHash(spec), file: `evolved:${String(spec.id)}` }, systemPrompt),
    directionProblem: () => null,
  };
}
