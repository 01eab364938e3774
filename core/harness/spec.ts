/**
 * Declarative harness specs: one JSON or YAML file per harness, validated with
 * zod, versioned by a hash of its content. A spec changes what the policy
 * sees and how its text becomes an action; the env keeps its protocol.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { formatZodError } from '../zod-errors';
import { RepairDirection } from './direction';
import { UserError } from '../errors';
import { baseFirst, basePoolIssue } from './pool';
import { contentHash, POOL_MANIFEST_FILE } from './frozen-pool';

const Regex = z.string().refine(
  (source) => {
    try {
      new RegExp(source);
      return true;
    } catch {
      return false;
    }
  },
  { message: 'not a valid regular expression' },
);

/** Text repairs applied to an assistant turn before the env parses it (action realization). */
export const TextRepair = z.enum([
  /** A ```sql block with no `Action:` line becomes `Action: Operation` + the block. */
  'add_missing_operation_line',
  /** A `Final Answer:` with no `Action:` line becomes `Action: Answer` + the answer. */
  'add_missing_answer_line',
  /** A bare SQL statement (no fence, no action line) is wrapped as an operation. */
  'wrap_bare_sql',
  /** Several action lines: keep from the last one on (the model's final decision). */
  'keep_last_action',
  /** SWE: a tool call written as text (`<tool_call>{...}</tool_call>`, a ```json block, a bare object) becomes the call. */
  'tool_call_from_text',
  /** AppWorld: code calling `apis.<app>.<api>(...)` written without a fence is wrapped in a ```python block. */
  'wrap_bare_python',
]);
export type TextRepair = z.infer<typeof TextRepair>;

export const TurnHint = z.object({
  when: z.enum(['every_turn', 'after_error', 'after_empty_result', 'last_turn']),
  text: z.string().min(1),
});

export const HarnessSpec = z
  .object({
    id: z.string().regex(/^[a-z][a-z0-9_-]*$/, 'use lower-case letters, digits, - and _'),
    parent: z.string().nullable(),
    direction: RepairDirection,
    description: z.string().min(1),
    /** The env this harness is written for (its protocol's words appear in the spec). */
    env: z.string().min(1),
    /** Failures it is aimed at, in words: documentation for people and for LLM voters. */
    targets: z.array(z.string()).default([]),
    context: z
      .object({
        /** Replaces the env's own system prompt when set; the base harness leaves it unset. */
        systemPrompt: z.string().optional(),
        /** Extra instructions appended to the system prompt (a schema contract, a recipe, dialect notes). */
        append: z.array(z.string().min(1)).default([]),
      })
      .prefault({}),
    turnHints: z.array(TurnHint).default([]),
    actions: z
      .object({
        repairs: z.array(TextRepair).default([]),
        /** Actions matching `pattern` are refused with `feedback` (the turn is spent; the episode goes on). */
        reject: z
          .array(
            z.object({
              pattern: Regex,
              flags: z
                .string()
                .regex(/^[imsu]*$/)
                .default('i'),
              feedback: z.string().min(1),
            }),
          )
          .default([]),
      })
      .prefault({}),
    observations: z
      .object({
        /** Cut observations to this many characters (with [TRUNCATED]); the env's own cut applies first. */
        maxChars: z.number().int().positive().optional(),
        /** Observations matching `match` get `note` appended (error annotation). */
        annotate: z
          .array(
            z.object({
              match: Regex,
              flags: z
                .string()
                .regex(/^[imsu]*$/)
                .default('i'),
              note: z.string().min(1),
            }),
          )
          .default([]),
      })
      .prefault({}),
    budget: z
      .object({
        /** Replaces the run's max turns when set. */
        maxTurns: z.number().int().positive().optional(),
        extraTurns: z.number().int().min(0).default(0),
        /** Refuse a final answer until an earlier action matched `requireBefore` (verify before finish). */
        finishGuard: z.object({ finishPattern: Regex, requireBefore: Regex, feedback: z.string().min(1) }).optional(),
      })
      .prefault({}),
  })
  .strict();
export type HarnessSpec = z.infer<typeof HarnessSpec>;

export class HarnessSpecError extends UserError {
  override name = 'HarnessSpecError';
}

/** Content-hash version: the same spec text (after parsing) always has the same version. */
export function specVersion(spec: HarnessSpec): string {
  return contentHash(spec);
}

export interface LoadedSpec {
  spec: HarnessSpec;
  version: string;
  file: string;
}

/** Parses spec text (JSON or YAML by extension); every problem is reported with its field path. */
export function parseHarnessSpec(text: string, file: string): LoadedSpec {
  let raw: unknown;
  try {
    raw = /\.ya?ml$/i.test(file) ? parseYaml(text) : JSON.parse(text);
  } catch (err) {
    throw new HarnessSpecError(`harness spec ${file}: cannot parse it: ${(err as Error).message}`);
  }
  const parsed = HarnessSpec.safeParse(raw);
  if (!parsed.success) throw new HarnessSpecError(`harness spec ${file} is invalid:\n${formatZodError(parsed.error)}`);
  return { spec: parsed.data, version: specVersion(parsed.data), file };
}

export function loadHarnessSpec(file: string): LoadedSpec {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new HarnessSpecError(`harness spec ${file}: cannot read it: ${(err as Error).message}`);
  }
  return parseHarnessSpec(text, file);
}

/** A pool: every spec file of a folder, base first; parents must be in the pool. */
export function loadHarnessPool(files: readonly string[]): LoadedSpec[] {
  const loaded = files.map(loadHarnessSpec);
  const ids = new Map<string, string>();
  for (const { spec, file } of loaded) {
    const other = ids.get(spec.id);
    if (other) throw new HarnessSpecError(`harness id '${spec.id}' is used by both ${other} and ${file}`);
    ids.set(spec.id, file);
  }
  for (const { spec, file } of loaded) {
    if (spec.parent !== null && !ids.has(spec.parent)) {
      throw new HarnessSpecError(`harness spec ${file}: parent: '${spec.parent}' is not in the pool (${[...ids.keys()].join(', ')})`);
    }
  }
  const issue = basePoolIssue(loaded.map((l) => l.spec));
  if (issue) throw new HarnessSpecError(`${issue} in ${files.map((f) => path.basename(f)).join(', ')}`);
  const byId = new Map(loaded.map((l) => [l.spec.id, l]));
  return baseFirst(loaded.map((l) => l.spec)).map((spec) => byId.get(spec.id)!);
}

/** The spec files (.json, .yaml, .yml) of a pool folder, in name order; a frozen pool's manifest is not one. */
export function specFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => /\.(json|ya?ml)$/i.test(f) && f !== POOL_MANIFEST_FILE)
    .sort()
    .map((f) => path.join(dir, f));
}
