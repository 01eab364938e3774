/**
 * SWE instances, in SWE-bench / SWE-Gym's format, and the shipped set they
 * are built from.
 *
 * Two files:
 * - the **instance set** the project ships (data/swe/instances.json): metadata
 *   only (package, the two PyPI releases, test ids, a problem statement), so
 *   no third-party code is committed; `harness-s swe setup` rebuilds each
 *   tree from PyPI and writes the full instances;
 * - **instances** as SWE-bench has them (JSONL: instance_id, repo,
 *   base_commit, problem_statement, patch, test_patch, FAIL_TO_PASS,
 *   PASS_TO_PASS, version, ...). Ours carry a `harness_s` field that says
 *   where their tree is; a user's own SWE-bench or SWE-Gym file loads too,
 *   but its instances need their Docker images (see docs/swe.md).
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { UserError } from '../../errors';
import { formatZodError } from '../../zod-errors';

export class SweDataError extends UserError {
  override name = 'SweDataError';
}

/** A pytest node id, as `pytest -rA` prints it (`tests/test_x.py::TestY::test_z[param]`). */
const TestId = z.string().min(1);

/** SWE-bench stores the test lists as JSON text; SWE-Gym and our files as arrays: both load. */
const TestList = z.preprocess(
  (value) => {
    if (typeof value !== 'string') return value;
    try {
      return JSON.parse(value);
    } catch {
      return value;
    }
  },
  z.array(TestId, { error: 'a list of test ids (or, as SWE-bench stores it, that list as JSON text)' }),
);

/** Where a shipped instance's code comes from: two source releases on PyPI. */
export const PypiSource = z.strictObject({
  package: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'a PyPI project name'),
  /** The release the agent starts from. */
  before: z.string().min(1),
  /** The release whose code is the gold patch and whose tests are the test patch. */
  after: z.string().min(1),
  /** Folders of the tree put on PYTHONPATH (the package is imported from the tree, never installed). */
  pythonpath: z.array(z.string()).default(['.']),
  /** The test files the test patch touches that pytest runs. */
  test_files: z.array(z.string().min(1)).min(1),
  /** Extra pytest arguments (e.g. `-p no:randomly`). */
  pytest_args: z.array(z.string()).default([]),
});
export type PypiSource = z.infer<typeof PypiSource>;

export const ShippedInstance = PypiSource.extend({
  instance_id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'letters, digits, . _ -'),
  license: z.string().min(1),
  problem_statement: z.string().min(1),
  FAIL_TO_PASS: z.array(TestId).min(1),
  PASS_TO_PASS: z.array(TestId),
});
export type ShippedInstance = z.infer<typeof ShippedInstance>;

export const InstanceSet = z.strictObject({
  description: z.string(),
  /** The Python tests run with: an interpreter the sandbox user can read, and pinned test requirements. */
  environment: z.strictObject({
    python: z.string().min(1),
    requirements: z.array(z.string().min(1)),
  }),
  instances: z.array(ShippedInstance),
});
export type InstanceSet = z.infer<typeof InstanceSet>;

/** A built instance's tree and how its tests run (our field; SWE-bench has none). */
export const HarnessSSource = PypiSource.extend({
  /** The tree of `before`, a git repository at base_commit, under the SWE home. */
  tree: z.string().min(1),
  /** The venv its tests run in. */
  venv: z.string().min(1),
});
export type HarnessSSource = z.infer<typeof HarnessSSource>;

export const SweInstance = z.looseObject({
  instance_id: z.string().min(1),
  repo: z.string().min(1),
  base_commit: z.string().min(1),
  problem_statement: z.string().min(1),
  patch: z.string(),
  test_patch: z.string(),
  FAIL_TO_PASS: TestList,
  PASS_TO_PASS: TestList,
  version: z.union([z.string(), z.number()]).transform(String).optional(),
  hints_text: z.string().optional(),
  created_at: z.string().optional(),
  harness_s: HarnessSSource.optional(),
});
export type SweInstance = z.infer<typeof SweInstance>;

export function parseInstanceSet(text: string, file: string): InstanceSet {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new SweDataError(`${file}: not JSON: ${(err as Error).message}`);
  }
  const parsed = InstanceSet.safeParse(raw);
  if (!parsed.success) throw new SweDataError(`${file} is not a SWE instance set:\n${formatZodError(parsed.error, InstanceSet)}`);
  const ids = new Set<string>();
  for (const instance of parsed.data.instances) {
    if (ids.has(instance.instance_id)) throw new SweDataError(`${file}: instance_id '${instance.instance_id}' appears twice`);
    ids.add(instance.instance_id);
  }
  return parsed.data;
}

/** SWE-bench JSONL (one instance per line), or a JSON array of instances. */
export function parseSweInstances(text: string, file: string): SweInstance[] {
  const trimmed = text.trim();
  const entries: Array<{ where: string; raw: unknown }> = [];
  if (trimmed.startsWith('[')) {
    let raw: unknown;
    try {
      raw = JSON.parse(trimmed);
    } catch (err) {
      throw new SweDataError(`${file}: not JSON: ${(err as Error).message}`);
    }
    (raw as unknown[]).forEach((entry, i) => entries.push({ where: `${file}[${i}]`, raw: entry }));
  } else {
    text.split('\n').forEach((line, i) => {
      if (line.trim() === '') return;
      try {
        entries.push({ where: `${file}:${i + 1}`, raw: JSON.parse(line) });
      } catch (err) {
        throw new SweDataError(`${file}:${i + 1}: not a JSON object: ${(err as Error).message}`);
      }
    });
  }
  if (entries.length === 0) throw new SweDataError(`${file}: no instances`);
  const ids = new Set<string>();
  return entries.map(({ where, raw }) => {
    const parsed = SweInstance.safeParse(raw);
    if (!parsed.success) throw new SweDataError(`${where} is not a SWE-bench instance:\n${formatZodError(parsed.error)}`);
    if (ids.has(parsed.data.instance_id)) throw new SweDataError(`${where}: instance_id '${parsed.data.instance_id}' appears twice`);
    ids.add(parsed.data.instance_id);
    return parsed.data;
  });
}

export function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new SweDataError(`cannot read ${file}: ${(err as Error).message}`);
  }
}

/** Is this file a shipped instance set (metadata to build from) rather than built instances? */
export function isInstanceSetText(text: string): boolean {
  const trimmed = text.trimStart();
  if (!trimmed.startsWith('{')) return false;
  try {
    const raw = JSON.parse(trimmed) as Record<string, unknown>;
    return typeof raw === 'object' && raw !== null && 'instances' in raw && 'environment' in raw;
  } catch {
    return false;
  }
}

/** The task kind the router keeps profiles by: the repository (for ours, the PyPI package). */
export function instanceKind(instance: SweInstance): string {
  // PEP 503's normal form, so `Markdown` and `markdown` are one kind.
  return instance.harness_s ? instance.harness_s.package.toLowerCase().replace(/[-_.]+/g, '-') : instance.repo;
}
