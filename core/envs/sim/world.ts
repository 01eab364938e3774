/**
 * The sim world: a SIMULATED agent domain, described by one editable JSON file.
 *
 * Task kinds need sets of behaviours; the sim policy picks behaviours turn by
 * turn; harnesses change what it picks (prompted effects: hint lines in the
 * system prompt that bias the policy's logits, so training can learn them) or
 * do the work themselves (scaffolded effects: masked out of training).
 *
 * How rescue reaches the base harness (the transfer the method relies on):
 * - Prompted: a hint adds a constant to a behaviour's logit; the logits are
 *   the policy's parameters, one per (kind, previous action, action), shared
 *   by every context with or without hints. A rescued trajectory is trained
 *   in its own context (the sibling's prompt), and the importance-sampling
 *   gradient of each sampled token lands on those shared logits
 *   (d log p_hint(a) / d logit(a) = 1 - p_hint(a)): a successful hinted
 *   trajectory raises what it did and lowers what it did not do (finishing
 *   early) for the base harness too, a little less than an unhinted success
 *   would, since the hint already made its actions likely.
 * - Scaffolded: the harness's own work enters as observations (mask 0), and
 *   the policy's next choice is made in the `harness` context, which the base
 *   harness never shows: nothing of it reaches the base policy. (A format
 *   repair is the exception: the policy's own `Maybe:` token stays trained.)
 * How far the base policy moves is bounded by the training budget: with Adam
 * each step moves a logit by about the learning rate. Measured on the shipped
 * world (docs/results.md, "Prompted siblings against the scaffolded control"):
 * at learning rate 0.05 for 20 steps Harness-S's base-harness gain over
 * policy-only is within noise; at 0.2 it is +15.9 points, 95% CI [+6.6,
 * +25.2], while the scaffolded control world (examples/sim-worlds/scaffolded.json)
 * gives +1.4, CI [-12.8, +15.6].
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { formatZodError } from '../../zod-errors';
import { RepairDirection } from '../../harness/direction';
import { UserError } from '../../errors';
import { basePoolIssue, splitPool } from '../../harness/pool';
import { POOL_MANIFEST_FILE } from '../../harness/frozen-pool';

/** The behaviour that ends an episode; every world has it. */
export const FINISH = 'finish';

const Name = z.string().regex(/^[a-z][a-z0-9_]*$/, 'use lower_snake_case');

export const SimHarness = z.object({
  id: z.string().regex(/^[a-z][a-z0-9_-]*$/, 'use lower-case letters, digits, - and _'),
  parent: z.string().nullable(),
  direction: RepairDirection,
  description: z.string(),
  /** Prompted: a `Hint: <behaviour>` line per entry (raises that behaviour's logit). */
  hints: z.array(Name).default([]),
  /** Prompted: an `Avoid: <behaviour>` line per entry (lowers that behaviour's logit). */
  avoid: z.array(Name).default([]),
  /** Prompted: a `Hint: Action:` line (raises the chance of a well-formed action). */
  formatHint: z.boolean().default(false),
  scaffold: z
    .object({
      /** Scaffolded: the harness performs these behaviours before the policy acts. */
      performs: z.array(Name).default([]),
      /** Scaffolded: a malformed action (`Maybe: x`) is repaired into `Action: x`. */
      repairFormat: z.boolean().default(false),
    })
    .default({ performs: [], repairFormat: false }),
  /** Extra turns this harness grants on top of the run's max turns. */
  extraTurns: z.number().int().min(0).default(0),
});
export type SimHarness = z.infer<typeof SimHarness>;

export const SimKind = z.object({
  name: Name,
  requires: z.array(Name).min(1),
  tasks: z.number().int().min(1),
  goal: z.string(),
});
export type SimKind = z.infer<typeof SimKind>;

export const SimModel = z.object({
  /** The base model id the sim inference server serves. */
  name: z.string().min(1),
  /** Logit bias that one `Hint:`/`Avoid:` line adds to (subtracts from) its behaviour. */
  hintStrength: z.number(),
  /** Logit bias of `Hint: Action:` on the well-formed action. */
  formatHintStrength: z.number(),
  init: z.object({
    /** Per kind: initial logit of a well-formed `Action:` (vs `Maybe:`). */
    formatLogit: z.record(z.string(), z.number()),
    /** Per kind, per behaviour (and `finish`): initial logit, whatever came before. */
    propensity: z.record(z.string(), z.record(z.string(), z.number())),
    /** Subtracted from a behaviour's initial logit right after that same behaviour. */
    repeatPenalty: z.number(),
  }),
});
export type SimModel = z.infer<typeof SimModel>;

export const SimWorld = z
  .object({
    name: z.string(),
    description: z.string(),
    behaviours: z.array(Name).min(1),
    /**
     * Behaviours that consult the environment (its schema, its docs): the
     * environment-contract direction works with these; the others are procedure.
     */
    contractBehaviours: z.array(Name).default([]),
    /** Turns a behaviour costs; 1 when absent. */
    turnCosts: z.record(z.string(), z.number().int().min(1)).default({}),
    kinds: z.array(SimKind).min(1),
    model: SimModel,
    harnesses: z.array(SimHarness).min(1),
  })
  .superRefine((world, ctx) => {
    const behaviours = new Set(world.behaviours);
    if (behaviours.has(FINISH)) {
      ctx.addIssue({ code: 'custom', path: ['behaviours'], message: `'${FINISH}' is implicit; do not list it` });
    }
    world.contractBehaviours.forEach((b, i) => {
      if (!behaviours.has(b)) ctx.addIssue({ code: 'custom', path: ['contractBehaviours', i], message: `unknown behaviour '${b}'` });
    });
    const actions = new Set([...world.behaviours, FINISH]);
    const kinds = new Set(world.kinds.map((k) => k.name));
    world.kinds.forEach((kind, i) =>
      kind.requires.forEach((b, j) => {
        if (!behaviours.has(b)) {
          ctx.addIssue({ code: 'custom', path: ['kinds', i, 'requires', j], message: `unknown behaviour '${b}'` });
        }
      }),
    );
    for (const b of Object.keys(world.turnCosts)) {
      if (!behaviours.has(b)) ctx.addIssue({ code: 'custom', path: ['turnCosts', b], message: `unknown behaviour '${b}'` });
    }
    for (const [kind, row] of Object.entries(world.model.init.propensity)) {
      if (!kinds.has(kind)) {
        ctx.addIssue({ code: 'custom', path: ['model', 'init', 'propensity', kind], message: `unknown kind '${kind}'` });
      }
      for (const b of Object.keys(row)) {
        if (!actions.has(b)) {
          ctx.addIssue({ code: 'custom', path: ['model', 'init', 'propensity', kind, b], message: `unknown behaviour '${b}'` });
        }
      }
    }
    for (const kind of Object.keys(world.model.init.formatLogit)) {
      if (!kinds.has(kind)) {
        ctx.addIssue({ code: 'custom', path: ['model', 'init', 'formatLogit', kind], message: `unknown kind '${kind}'` });
      }
    }
    const ids = new Set<string>();
    world.harnesses.forEach((h, i) => {
      if (ids.has(h.id)) ctx.addIssue({ code: 'custom', path: ['harnesses', i, 'id'], message: `duplicate harness id '${h.id}'` });
      ids.add(h.id);
      const check = (list: string[], field: string, allowed: Set<string>) =>
        list.forEach((b, j) => {
          if (!allowed.has(b)) ctx.addIssue({ code: 'custom', path: ['harnesses', i, field, j], message: `unknown behaviour '${b}'` });
        });
      check(h.hints, 'hints', actions);
      check(h.avoid, 'avoid', actions);
      check(h.scaffold.performs, 'scaffold.performs', behaviours);
    });
    world.harnesses.forEach((h, i) => {
      if (h.parent !== null && !ids.has(h.parent)) {
        ctx.addIssue({ code: 'custom', path: ['harnesses', i, 'parent'], message: `unknown parent harness '${h.parent}'` });
      }
    });
    const poolIssue = basePoolIssue(world.harnesses);
    if (poolIssue) ctx.addIssue({ code: 'custom', path: ['harnesses'], message: poolIssue });
  });
export type SimWorld = z.infer<typeof SimWorld>;

/** The world shipped with the project (core/envs/sim/world.json). */
export const DEFAULT_WORLD_PATH = path.join(__dirname, 'world.json');

export class SimWorldError extends UserError {
  override name = 'SimWorldError';
}

/** Reads and validates a world file; every problem is reported with its JSON path. */
export function loadSimWorld(file: string = DEFAULT_WORLD_PATH): SimWorld {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new SimWorldError(`sim world ${file}: cannot read it as JSON: ${(err as Error).message}`);
  }
  const parsed = SimWorld.safeParse(raw);
  if (!parsed.success) throw new SimWorldError(`sim world ${file} is invalid:\n${formatZodError(parsed.error)}`);
  return parsed.data;
}

/** A SimHarness as written in a file of its own, not yet checked. */
export interface SimHarnessFile {
  file: string;
  spec: unknown;
}

/** The SimHarness JSON files of a folder, in name order (a frozen pool's manifest is not one). */
export function readSimHarnessDir(dir: string): SimHarnessFile[] {
  let names: string[];
  try {
    names = readdirSync(dir)
      .filter((f) => /\.json$/i.test(f) && f !== POOL_MANIFEST_FILE)
      .sort();
  } catch (err) {
    throw new SimWorldError(`sim harness folder ${dir}: cannot read it: ${(err as Error).message}`);
  }
  if (names.length === 0) throw new SimWorldError(`sim harness folder ${dir} has no .json harness files`);
  return names.map((name) => {
    const file = path.join(dir, name);
    try {
      return { file, spec: JSON.parse(readFileSync(file, 'utf8')) as unknown };
    } catch (err) {
      throw new SimWorldError(`sim harness ${file}: cannot read it as JSON: ${(err as Error).message}`);
    }
  });
}

/**
 * The world with these harnesses in place of its own. The world is parsed
 * again with them, so every rule a world file's harnesses keep (known
 * behaviours, parents in the pool, one base) holds; each problem names its file.
 */
export function withHarnessFiles(world: SimWorld, harnesses: readonly SimHarnessFile[]): SimWorld {
  const parsed = SimWorld.safeParse({ ...world, harnesses: harnesses.map((h) => h.spec) });
  if (parsed.success) return parsed.data;
  const files = harnesses.map((h) => h.file);
  const lines = parsed.error.issues.map((issue) => {
    const [section, index, ...field] = issue.path;
    if (section === 'harnesses' && typeof index === 'number')
      return `  - ${files[index]}: ${field.length ? field.join('.') : '(root)'}: ${issue.message}`;
    if (section === 'harnesses') return `  - ${issue.message} (in ${files.map((f) => path.basename(f)).join(', ')})`;
    return `  - ${issue.path.join('.')}: ${issue.message}`;
  });
  throw new SimWorldError(`sim harnesses for world '${world.name}' are invalid:\n${lines.join('\n')}`);
}

export function turnCost(world: SimWorld, behaviour: string): number {
  return world.turnCosts[behaviour] ?? 1;
}

export function baseHarness(world: SimWorld): SimHarness {
  return splitPool(world.harnesses).base;
}
