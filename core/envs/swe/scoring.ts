/**
 * Scoring as SWE-bench does it: on a fresh copy of the tree, apply the
 * model's patch, then the test patch, run the instance's test files with
 * `pytest -rA`, and read each test's result. Resolved (reward 1) only when
 * every FAIL_TO_PASS and every PASS_TO_PASS test passes. The per-test
 * outcome is kept.
 */
import { passes, parsePytestLog, type TestStatus } from './pytest-log';
import type { SweInstance } from './instances';
import { Workspace } from './workspace';
import { isTestPath } from './trees';

/** Wall clock for one instance's test run. */
export const TEST_TIMEOUT_SECONDS = 900;

export interface TestCounts {
  passed: number;
  total: number;
}

export interface SweEvaluation {
  instanceId: string;
  resolved: boolean;
  /** Did the model's patch apply? (An empty patch applies.) */
  applied: boolean;
  /** Why it did not, or why the tests could not run. */
  error: string | null;
  failToPass: TestCounts;
  passToPass: TestCounts;
  /** Every test the summary named, with its status; FAIL_TO_PASS/PASS_TO_PASS tests it did not name are MISSING. */
  tests: Record<string, TestStatus | 'MISSING'>;
  seconds: number;
  /** The test run's output, its last 4000 characters. */
  logTail: string;
}

/** The instance's test command: pytest on its test files, every result in the summary. */
export function testCommand(instance: SweInstance): string {
  const source = instance.harness_s!;
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  // --color=no: a project's own config may force colour, which would hide the summary lines from the parser.
  return ['python', '-m', 'pytest', '-rA', '-p', 'no:cacheprovider', '--color=no', ...source.pytest_args, ...source.test_files].map(quote).join(' ');
}

/** An evaluation of a patch that never reached the tests (it did not apply, or there was none to take). */
export function unscored(instance: SweInstance, error: string, applied = false, seconds = 0): SweEvaluation {
  return {
    instanceId: instance.instance_id, resolved: false, applied, error,
    failToPass: { passed: 0, total: instance.FAIL_TO_PASS.length }, passToPass: { passed: 0, total: instance.PASS_TO_PASS.length },
    tests: {}, seconds, logTail: '',
  };
}

/**
 * The files a model's patch may not change: tests and what configures
 * pytest. SWE-bench applies the patch whole; under RL a policy would soon
 * learn to pass the checks by rewriting them (a conftest.py that marks every
 * test passed), so their hunks are dropped, and named in the evaluation.
 */
export function isProtectedPath(file: string): boolean {
  return isTestPath(file) || /(^|\/)(conftest\.py|pytest\.ini|tox\.ini|setup\.cfg|pyproject\.toml|\.pytest_cache\/.*)$/.test(file);
}

/** The patch without the parts that touch protected files, and those files. */
export function withoutProtectedFiles(patch: string): { patch: string; dropped: string[] } {
  const parts = patch.split(/(?=^diff --git )/m);
  const dropped: string[] = [];
  const kept = parts.filter((part) => {
    const header = /^diff --git a\/(\S+) b\/(\S+)/.exec(part);
    if (!header) return true;
    if (isProtectedPath(header[1]) || isProtectedPath(header[2])) {
      dropped.push(header[2]);
      return false;
    }
    return true;
  });
  return { patch: kept.join(''), dropped };
}

export async function evaluatePatch(instance: SweInstance, fullPatch: string, signal?: AbortSignal): Promise<SweEvaluation> {
  const started = Date.now();
  const failToPass = instance.FAIL_TO_PASS;
  const passToPass = instance.PASS_TO_PASS;
  const { patch: modelPatch, dropped } = withoutProtectedFiles(fullPatch);
  const workspace = Workspace.create(instance, `score-${instance.instance_id}`);
  const empty = (error: string, applied: boolean): SweEvaluation => unscored(instance, error, applied, (Date.now() - started) / 1000);
  try {
    if (modelPatch.trim() !== '') {
      const file = workspace.stage('model.patch', modelPatch);
      const applied = await workspace.exec(`git apply --whitespace=nowarn ${file}`, { timeoutSeconds: 60 }, signal);
      if (applied.exitCode !== 0) return empty(`the patch does not apply: ${applied.output.trim().slice(0, 1000)}`, false);
    }
    if (instance.test_patch.trim() !== '') {
      const file = workspace.stage('test.patch', instance.test_patch);
      const applied = await workspace.exec(`git apply --whitespace=nowarn ${file}`, { timeoutSeconds: 60 }, signal);
      if (applied.exitCode !== 0) return empty(`the test patch does not apply over the model's patch: ${applied.output.trim().slice(0, 1000)}`, true);
    }
    const result = await workspace.exec(testCommand(instance), { timeoutSeconds: TEST_TIMEOUT_SECONDS, maxOutputBytes: 32 * 1024 * 1024, killAfterOutputBytes: 64 * 1024 * 1024 }, signal);
    const statuses = parsePytestLog(result.output, [...failToPass, ...passToPass]);
    const tests: SweEvaluation['tests'] = Object.fromEntries(statuses);
    for (const id of [...failToPass, ...passToPass]) if (!statuses.has(id)) tests[id] = 'MISSING';
    const count = (ids: readonly string[]) => ({ passed: ids.filter((id) => passes(statuses.get(id))).length, total: ids.length });
    const f2p = count(failToPass);
    const p2p = count(passToPass);
    return {
      instanceId: instance.instance_id,
      resolved: f2p.passed === f2p.total && p2p.passed === p2p.total,
      applied: true,
      error: result.timedOut
        ? `the tests ran over ${TEST_TIMEOUT_SECONDS} s`
        : result.flooded
          ? 'the tests wrote more output than allowed'
          : dropped.length
            ? `left out of the patch (tests and test configuration are not the agent's to change): ${dropped.join(', ')}`
            : null,
      failToPass: f2p,
      passToPass: p2p,
      tests,
      seconds: (Date.now() - started) / 1000,
      logTail: result.output.slice(-4000),
    };
  } finally {
    workspace.close();
  }
}
