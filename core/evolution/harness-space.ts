/**
 * The space candidates live in, per env: the env's harness spec format (the
 * sim's `SimHarness`, or the declarative `HarnessSpec` of DBBench and
 * charset), its JSON Schema for proposers, which fields each repair direction
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
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { EnvConfig } from '../config';
import type { Environment } from '../envs/environment';
import { CHARSET_POOL_DIR } from '../envs/charset/environment';
import { APPWORLD_POOL_DIR, DBBENCH_POOL_DIR, ENV_SYSTEM_PROMPTS, SWE_POOL_DIR } from '../envs/registry';
import { simHarness } from '../envs/sim/harnesses';
import { FINISH, SimHarness, type SimWorld } from '../envs/sim/world';
import type { SimEnvironment } from '../envs/sim/environment';
import { contentHash, poolsRoot, readFrozenPool } from '../harness/frozen-pool';
import type { Harness } from '../harness/harness';
import { splitPool } from '../harness/pool';
import { HarnessSpec, loadHarnessPool, loadHarnessSpec, specFiles } from '../harness/spec';
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

const FREE_FIELDS = ['description', 'targets'];

const SIM_MAY_CHANGE: Record<SiblingDirection, string[]> = {
  action_realization: ['formatHint', 'scaffold.repairFormat'],
  environment_contract: ['hints', 'scaffold.performs'],
  trajectory_regulation: ['extraTurns', 'avoid', 'hints'],
  procedural_skill: ['hints'],
};

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
const SIM_FIELDS = [...FREE_FIELDS, 'hints', 'avoid', 'formatHint', 'scaffold.performs', 'scaffold.repairFormat', 'extraTurns'];

function zodCheck<T extends z.ZodType>(schema: T, raw: unknown): { ok: true; spec: z.infer<T> } | { ok: false; error: string } {
  const parsed = schema.safeParse(raw);
  return parsed.success ? { ok: true, spec: parsed.data } : { ok: false, error: formatZodError(parsed.error, schema) };
}

function simSpace(world: SimWorld): HarnessSpace {
  const actions = new Set([...world.behaviours, FINISH]);
  const behaviours = new Set(world.behaviours);
  return {
    env: 'sim',
    jsonSchema: () => z.toJSONSchema(SimHarness, { io: 'input', unrepresentable: 'any' }),
    mayChange: SIM_MAY_CHANGE,
    fields: SIM_FIELDS,
    envFacts: { behaviours: world.behaviours, contractBehaviours: world.contractBehaviours, finish: FINISH, note: 'SIMULATED environment: a task succeeds when the agent performs the behaviours its kind requires, then finishes.' },
    check(raw) {
      const checked = zodCheck(SimHarness, raw);
      if (!checked.ok) return checked;
      const spec = checked.spec;
      const unknown = [
        ...spec.hints.filter((b) => !actions.has(b)).map((b) => `hints: unknown behaviour '${b}'`),
        ...spec.avoid.filter((b) => !actions.has(b)).map((b) => `avoid: unknown behaviour '${b}'`),
        ...spec.scaffold.performs.filter((b) => !behaviours.has(b)).map((b) => `scaffold.performs: unknown behaviour '${b}'`),
      ];
      if (unknown.length > 0) return { ok: false, error: `${unknown.map((u) => `  - ${u}`).join('\n')}\n  (the world's behaviours: ${world.behaviours.join(', ')})` };
      return { ok: true, spec: spec as unknown as Record<string, unknown> };
    },
    harness: (spec) => simHarness(spec as unknown as SimHarness),
    directionProblem(direction, spec, parent) {
      const contract = new Set(world.contractBehaviours);
      if (contract.size === 0) return null;
      const added = (field: 'hints' | 'performs') => {
        const of = (h: Record<string, unknown>) => (field === 'hints' ? (h as unknown as SimHarness).hints : (h as unknown as SimHarness).scaffold.performs) ?? [];
        const before = new Set(of(parent));
        return of(spec).filter((b) => !before.has(b));
      };
      const outside = (list: string[], wantContract: boolean) => list.filter((b) => b !== FINISH && contract.has(b) !== wantContract);
      const contractList = world.contractBehaviours.join(', ');
      if (direction === 'environment_contract') {
        const wrong = [...outside(added('hints'), true), ...outside(added('performs'), true)];
        return wrong.length ? `environment_contract adds only behaviours that consult the environment (${contractList}); ${wrong.join(', ')} is procedure` : null;
      }
      if (direction === 'procedural_skill' || direction === 'trajectory_regulation') {
        const wrong = outside(added('hints'), false);
        return wrong.length ? `${direction} hints procedure, not what consults the environment (${wrong.join(', ')}: environment_contract)` : null;
      }
      return null;
    },
  };
}

function declarativeSpace(env: string): HarnessSpace {
  return {
    env,
    jsonSchema: () => z.toJSONSchema(HarnessSpec, { io: 'input', unrepresentable: 'any' }),
    mayChange: SPEC_MAY_CHANGE,
    fields: SPEC_FIELDS,
    envFacts: {},
    check(raw) {
      const checked = zodCheck(HarnessSpec, raw);
      if (!checked.ok) return checked;
      if (checked.spec.env !== env) return { ok: false, error: `  - env: must be '${env}' (the env this pool is evolved for), not '${checked.spec.env}'` };
      return { ok: true, spec: checked.spec as unknown as Record<string, unknown> };
    },
    // On the env protocol's own system prompt, as the env's pool is (SWE, AppWorld; DBBench has none).
    harness: (spec) => specHarness({ spec: spec as unknown as HarnessSpec, version: contentHash(spec), file: `evolved:${String(spec.id)}` }, ENV_SYSTEM_PROMPTS[env] ?? ''),
    directionProblem: () => null,
  };
}

export function harnessSpaceFor(envConfig: EnvConfig, env: Environment): HarnessSpace {
  return envConfig.kind === 'sim' ? simSpace((env as SimEnvironment).world) : declarativeSpace(envConfig.kind);
}

/**
 * The spec evolution starts from: the `base` file a config names, else the
 * base of the env's pool (its frozen pool, its harness folder, or what it ships).
 */
export function baseSpecFor(envConfig: EnvConfig, env: Environment, baseFile: string | undefined): Record<string, unknown> {
  const space = harnessSpaceFor(envConfig, env);
  let raw: unknown;
  let source: string;
  if (baseFile !== undefined) {
    source = baseFile;
    raw = envConfig.kind === 'sim' ? readJson(baseFile) : loadHarnessSpec(baseFile).spec;
  } else if (envConfig.pool !== undefined) {
    const frozen = readFrozenPool(path.join(poolsRoot(), envConfig.pool), envConfig.pool);
    const base = frozen.manifest.members.find((m) => m.direction === 'base');
    if (!base) throw new HarnessSpaceError(`frozen pool ${envConfig.pool} has no base harness`);
    source = `frozen pool ${envConfig.pool}`;
    raw = frozen.specs[base.id];
  } else if (envConfig.kind === 'sim') {
    source = 'the sim world';
    raw = splitPool((env as SimEnvironment).world.harnesses).base;
  } else {
    const dir = envConfig.harnessDir ?? { dbbench: DBBENCH_POOL_DIR, swe: SWE_POOL_DIR, appworld: APPWORLD_POOL_DIR, charset: CHARSET_POOL_DIR }[envConfig.kind];
    source = dir;
    raw = loadHarnessPool(specFiles(dir))[0].spec;
  }
  const checked = space.check(raw);
  if (!checked.ok) throw new HarnessSpaceError(`base harness from ${source} is invalid:\n${checked.error}`);
  if (checked.spec.direction !== 'base') throw new HarnessSpaceError(`base harness from ${source}: direction must be 'base', not '${String(checked.spec.direction)}'`);
  return checked.spec;
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new HarnessSpaceError(`base harness ${file}: cannot read it as JSON: ${(err as Error).message}`);
  }
}
