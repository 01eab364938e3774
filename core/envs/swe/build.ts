/**
 * Building SWE instances from PyPI release pairs, validating them, and
 * setting up a shipped instance set (trees, patches, venv) on a machine.
 *
 * An instance from `package` before -> after: the library code's diff is the
 * gold patch, the tests' diff the test patch; the test files the test patch
 * touches run without and with the gold patch (test patch applied both
 * times): FAIL_TO_PASS are the tests that fail without it and pass with it,
 * PASS_TO_PASS those that pass both times. An instance is kept only when the
 * gold patch passes every one of them three times out of three and, without
 * it, every FAIL_TO_PASS test fails.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { mapWithConcurrency } from '../../concurrency';
import { passes } from './pytest-log';
import { evaluatePatch, type SweEvaluation } from './scoring';
import {
  isInstanceSetText,
  parseInstanceSet,
  parseSweInstances,
  readText,
  SweDataError,
  type InstanceSet,
  type PypiSource,
  type ShippedInstance,
  type SweInstance,
} from './instances';
import {
  headCommit,
  installedPackages,
  normalizePackage,
  releaseDiff,
  releaseTree,
  shortHash,
  sweHome,
  testVenv,
  TREES_FOLDER,
} from './trees';

export type Log = (line: string) => void;

/**
 * The tests' venv, refused when it holds a package an instance is about: the
 * venv is visible in the sandbox, and a newer release of the package in it
 * would show the agent the fix.
 */
function venvFor(set: InstanceSet, packages: readonly string[]): string {
  const venv = testVenv(set.environment.python, set.environment.requirements);
  const installed = installedPackages(venv);
  const leaking = [...new Set(packages.map(normalizePackage))].filter((name) => installed.has(name));
  if (leaking.length) {
    throw new SweDataError(
      `the SWE test venv (${venv}) has ${leaking.join(', ')} installed (a requirement or a dependency of one): instances of ${leaking.length > 1 ? 'these packages' : 'that package'} ` +
        'would let the agent read a release with the fix; drop those instances or the requirement that brings the package in',
    );
  }
  return venv;
}

/** The full (SWE-bench format) instance of a shipped one, its tree and venv built on this machine. */
export function materialize(shipped: ShippedInstance, set: InstanceSet): SweInstance {
  const diff = releaseDiff(shipped.package, shipped.before, shipped.after);
  const tree = releaseTree(shipped.package, shipped.before);
  const venv = venvFor(set, [shipped.package]);
  const { instance_id, problem_statement, FAIL_TO_PASS, PASS_TO_PASS, license: _license, ...source } = shipped;
  return {
    instance_id,
    repo: `pypi/${shipped.package}`,
    base_commit: headCommit(tree),
    problem_statement,
    patch: diff.patch,
    test_patch: diff.testPatch,
    FAIL_TO_PASS,
    PASS_TO_PASS,
    version: shipped.before,
    harness_s: { ...source, tree, venv },
  };
}

/** Where the built instances of a set file are kept: keyed by the set's content. */
export function builtInstancesFile(setText: string): string {
  return path.join(sweHome(), 'sets', shortHash({ setText, trees: TREES_FOLDER }), 'instances.jsonl');
}

/** Builds every instance of a shipped set (downloads from PyPI the first time); returns the built JSONL's path. */
export function setupInstanceSet(file: string, log: Log = () => {}): string {
  const text = readText(file);
  const set = parseInstanceSet(text, file);
  const out = builtInstancesFile(text);
  if (existsSync(out)) {
    log(`swe setup: ${set.instances.length} instances already built: ${out}`);
    return out;
  }
  venvFor(
    set,
    set.instances.map((i) => i.package),
  );
  const built = set.instances.map((shipped, i) => {
    log(`swe setup: [${i + 1}/${set.instances.length}] ${shipped.instance_id} (${shipped.package} ${shipped.before} -> ${shipped.after})`);
    return materialize(shipped, set);
  });
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(`${out}.partial`, built.map((b) => JSON.stringify(b)).join('\n') + '\n');
  renameSync(`${out}.partial`, out);
  log(`swe setup: built ${built.length} instances: ${out}`);
  return out;
}

/** The instances of a data file: a shipped set (built by `swe setup`), or SWE-bench JSONL as it is. */
export function loadSweData(file: string): SweInstance[] {
  const text = readText(file);
  if (!isInstanceSetText(text)) return parseSweInstances(text, file);
  parseInstanceSet(text, file);
  const built = builtInstancesFile(text);
  if (!existsSync(built)) {
    throw new SweDataError(
      `${file} is a SWE instance set whose trees are not built on this machine: run \`npx harness-s swe setup --data ${file}\` (it downloads the releases from PyPI once)`,
    );
  }
  return parseSweInstances(readFileSync(built, 'utf8'), built);
}

export interface Validation {
  instanceId: string;
  ok: boolean;
  /** Why not, when not. */
  reason: string | null;
  gold: SweEvaluation[];
  none: SweEvaluation;
}

/** Gold patch `runs` times (all must resolve) and no patch once (every FAIL_TO_PASS must fail). */
export async function validateInstance(instance: SweInstance, runs = 3): Promise<Validation> {
  const gold: SweEvaluation[] = [];
  for (let i = 0; i < runs; i++) gold.push(await evaluatePatch(instance, instance.patch));
  const none = await evaluatePatch(instance, '');
  const failedGold = gold.find((g) => !g.resolved);
  const passingWithout = Object.entries(none.tests).filter(
    ([id, status]) => instance.FAIL_TO_PASS.includes(id) && status !== 'MISSING' && passes(status),
  );
  const reason = failedGold
    ? `the gold patch did not resolve it on run ${gold.indexOf(failedGold) + 1}: ${failedGold.error ?? describeMisses(instance, failedGold)}`
    : passingWithout.length
      ? `without a patch, FAIL_TO_PASS tests pass: ${passingWithout.map(([id]) => id).join(', ')}`
      : null;
  return { instanceId: instance.instance_id, ok: reason === null, reason, gold, none };
}

function describeMisses(instance: SweInstance, evaluation: SweEvaluation): string {
  const missed = [...instance.FAIL_TO_PASS, ...instance.PASS_TO_PASS].filter(
    (id) => !passes(evaluation.tests[id] === 'MISSING' ? undefined : evaluation.tests[id]),
  );
  return `${missed.length} tests not passing (${missed.slice(0, 5).join(', ')}${missed.length > 5 ? ', ...' : ''})`;
}

export interface ReplayResult {
  total: number;
  passed: number;
  instances: Array<{
    instanceId: string;
    gold: boolean;
    none: boolean;
    failToPass: number;
    passToPass: number;
    goldSeconds: number;
    reason: string | null;
  }>;
}

/** Each instance's gold patch must resolve it and no patch must not. */
export async function replaySwe(instances: readonly SweInstance[], concurrency: number, log: Log = () => {}): Promise<ReplayResult> {
  const rows: ReplayResult['instances'] = [];
  await mapWithConcurrency(instances, concurrency, async (instance) => {
    const gold = await evaluatePatch(instance, instance.patch);
    const none = await evaluatePatch(instance, '');
    const reason = !gold.resolved
      ? `gold: ${gold.error ?? describeMisses(instance, gold)}`
      : none.resolved
        ? 'resolved without a patch'
        : null;
    log(`swe replay: ${instance.instance_id}: ${reason ?? 'ok'} (${gold.seconds.toFixed(1)} s)`);
    rows.push({
      instanceId: instance.instance_id,
      gold: gold.resolved,
      none: none.resolved,
      failToPass: instance.FAIL_TO_PASS.length,
      passToPass: instance.PASS_TO_PASS.length,
      goldSeconds: gold.seconds,
      reason,
    });
  });
  rows.sort(
    (a, b) => instances.findIndex((i) => i.instance_id === a.instanceId) - instances.findIndex((i) => i.instance_id === b.instanceId),
  );
  return { total: rows.length, passed: rows.filter((r) => r.reason === null).length, instances: rows };
}

export interface BuildRequest extends Omit<PypiSource, 'test_files'> {
  instance_id?: string;
  license: string;
  problem_statement: string;
  /** The test files to run; every test module the test patch touches when absent. */
  test_files?: string[];
}

/** Builds one instance from a release pair and validates it; refuses it, saying why, when it does not hold. */
export async function buildInstance(request: BuildRequest, set: InstanceSet, log: Log = () => {}): Promise<ShippedInstance> {
  const what = `${request.package} ${request.before} -> ${request.after}`;
  const diff = releaseDiff(request.package, request.before, request.after);
  if (!diff.patch) throw new SweDataError(`${what}: no library code changed`);
  if (!diff.testPatch) throw new SweDataError(`${what}: no test changed, so there is nothing to tell a fix by`);
  const testFiles = request.test_files ?? diff.testFiles.filter((f) => /(^|\/)(test_[^/]*|[^/]*_test)\.py$/.test(f));
  const tree = releaseTree(request.package, request.before);
  const missing = testFiles.filter((f) => !existsSync(path.join(releaseTree(request.package, request.after), f)));
  if (testFiles.length === 0 || missing.length === testFiles.length)
    throw new SweDataError(`${what}: the test patch touches no test module that exists after the change`);
  const draft: SweInstance = {
    instance_id: request.instance_id ?? `${request.package}-${request.after}`,
    repo: `pypi/${request.package}`,
    base_commit: headCommit(tree),
    problem_statement: request.problem_statement,
    patch: diff.patch,
    test_patch: diff.testPatch,
    FAIL_TO_PASS: [],
    PASS_TO_PASS: [],
    version: request.before,
    harness_s: {
      package: request.package,
      before: request.before,
      after: request.after,
      pythonpath: request.pythonpath,
      pytest_args: request.pytest_args,
      test_files: testFiles.filter((f) => !missing.includes(f)),
      tree,
      venv: venvFor(set, [request.package]),
    },
  };
  log(`swe build: ${what}: running ${draft.harness_s!.test_files.join(', ')} without and with the gold patch`);
  const without = await evaluatePatch(draft, '');
  const withGold = await evaluatePatch(draft, draft.patch);
  const ids = [...new Set([...Object.keys(without.tests), ...Object.keys(withGold.tests)])].sort();
  const ok = (e: SweEvaluation, id: string) => e.tests[id] !== undefined && e.tests[id] !== 'MISSING' && passes(e.tests[id] as never);
  draft.FAIL_TO_PASS = ids.filter((id) => !ok(without, id) && ok(withGold, id));
  draft.PASS_TO_PASS = ids.filter((id) => ok(without, id) && ok(withGold, id));
  if (draft.FAIL_TO_PASS.length === 0) {
    throw new SweDataError(
      `${what}: no test fails without the gold patch and passes with it (${draft.PASS_TO_PASS.length} pass both ways)${withGold.error ? `; ${withGold.error}` : ''}\n${withGold.logTail.slice(-1500)}`,
    );
  }
  const validation = await validateInstance(draft);
  if (!validation.ok) throw new SweDataError(`${what}: refused: ${validation.reason}`);
  log(`swe build: ${what}: ${draft.FAIL_TO_PASS.length} fail-to-pass, ${draft.PASS_TO_PASS.length} pass-to-pass, valid`);
  return {
    instance_id: draft.instance_id,
    package: request.package,
    before: request.before,
    after: request.after,
    pythonpath: request.pythonpath,
    test_files: draft.harness_s!.test_files,
    pytest_args: request.pytest_args,
    license: request.license,
    problem_statement: request.problem_statement,
    FAIL_TO_PASS: draft.FAIL_TO_PASS,
    PASS_TO_PASS: draft.PASS_TO_PASS,
  };
}
