/**
 * Scoring as SWE-bench does it: on a fresh copy of the tree, apply the
 * model's patch, then the test patch, run the instance's test files with
 * `pytest -rA`, and read each test's result. Resolved (reward 1) only when
 * every FAIL_TO_PASS and every PASS_TO_PASS test passes. The per-test
 * outcome is kept.
 *
 * Only the tests decide: the answer is first held to the answer policy
 * (answer-policy.ts: what may change, what is left out, what is refused),
 * and the test run is made so that the answer's code cannot simply declare
 * itself right (verdict.ts).
 */
import { rmSync } from 'node:fs';
import path from 'node:path';
import {
  ANSWER_AST_PATH,
  ANSWER_AST_SOURCE,
  ANSWER_AST_TIMEOUT_SECONDS,
  answerAstCommand,
  answerAstRequest,
  answerAstVerdict,
  applyAnswerPolicy,
  packageScopeOf,
  type AnswerDecision,
  type PackageScope,
} from './answer-policy';
import { passes, parsePytestLog, type TestStatus } from './pytest-log';
import type { HarnessSSource, SweInstance } from './instances';
import { sourceOf, Workspace } from './workspace';
import { run } from './trees';
import { distrust, plantCanaries, pytestConfigFile, RUNNER_PATH, RUNNER_SOURCE, verdictCommand } from './verdict';

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

/** An evaluation of a patch that never reached the tests (it did not apply, or there was none to take). */
export function unscored(instance: SweInstance, error: string, applied = false, seconds = 0): SweEvaluation {
  return {
    instanceId: instance.instance_id,
    resolved: false,
    applied,
    error,
    failToPass: { passed: 0, total: instance.FAIL_TO_PASS.length },
    passToPass: { passed: 0, total: instance.PASS_TO_PASS.length },
    tests: {},
    seconds,
    logTail: '',
  };
}

const scopes = new Map<string, PackageScope>();

/** The instance's package folders and modules, from its base tree (read once per tree). */
export function packageScope(source: HarnessSSource): PackageScope {
  if (!scopes.has(source.tree)) {
    const files = run('git', ['-c', 'safe.directory=*', '-C', source.tree, 'ls-tree', '-r', '--name-only', '-z', 'HEAD'], {
      what: `listing ${source.tree}`,
    })
      .split('\0')
      .filter(Boolean);
    scopes.set(source.tree, packageScopeOf(files, source.pythonpath));
  }
  return scopes.get(source.tree)!;
}

/** What the evaluation says about the files left out of the answer. */
function droppedNote(dropped: AnswerDecision['dropped'], scope: PackageScope): string[] {
  const protectedFiles = dropped.filter((d) => d.why === 'protected').map((d) => d.file);
  const outside = dropped.filter((d) => d.why === 'outside').map((d) => d.file);
  const where = [...scope.packageDirs.map((d) => `${d}/`), ...scope.modules].join(', ');
  return [
    ...(protectedFiles.length
      ? [`left out of the patch (tests and test configuration are not the agent's to change): ${protectedFiles.join(', ')}`]
      : []),
    ...(outside.length ? [`left out of the patch (outside the package's source, ${where}): ${outside.join(', ')}`] : []),
  ];
}

/** A root worker gives the tree back to root for the test run: the sandbox user may read it, not change it. */
function freezeForTests(repo: string): void {
  if (process.getuid?.() !== 0) return;
  run('chown', ['-R', '--no-dereference', '0:0', repo], { what: `giving ${repo} back to root` });
  run('chmod', ['-R', 'go-w,a+rX', repo], { what: `making ${repo} read-only to the sandbox` });
}

/** Paths changed in the workspace (tracked or not) other than `allowed`. */
async function filesBeyond(workspace: Workspace, allowed: readonly string[], signal?: AbortSignal): Promise<string[]> {
  const status = await workspace.exec(
    'git -c core.quotepath=off status --porcelain=v1 -z --untracked-files=all --no-renames',
    { timeoutSeconds: 60, maxOutputBytes: 1024 * 1024 },
    signal,
  );
  if (status.exitCode !== 0 || status.outputTruncated) return [`(the workspace's changes could not be listed: exit ${status.exitCode})`];
  const permitted = new Set(allowed);
  return status.output
    .split('\0')
    .filter(Boolean)
    .map((entry) => entry.slice(3))
    .filter((file) => !permitted.has(file));
}

export async function evaluatePatch(instance: SweInstance, fullPatch: string, signal?: AbortSignal): Promise<SweEvaluation> {
  const started = Date.now();
  const answer = applyAnswerPolicy(fullPatch, packageScope(sourceOf(instance)));
  if (answer.refused) return unscored(instance, `the answer is refused: ${answer.refused}`, false, (Date.now() - started) / 1000);
  return evaluateAnswer(instance, answer, { signal, started, checkSyntaxTree: true });
}

export interface AnswerScoringOptions {
  signal?: AbortSignal;
  /** When the scoring began (the answer policy's time counts). */
  started?: number;
  /**
   * Run the answer policy's syntax-tree check (answer_ast.py) on the tree
   * after the patch, before the tests: part of the answer policy, so
   * evaluatePatch asks for it and a test of the verdict alone does not.
   */
  checkSyntaxTree?: boolean;
  /** Canaries per test file (verdict.ts); null plants every one that can be made, to check them all. */
  canariesPerFile?: number | null;
}

/**
 * The test run for an answer the answer policy has already taken (kept and
 * trimmed, not refused). evaluatePatch is the way in; this is exported so
 * that the verdict can be tested against code the policy would refuse.
 */
export async function evaluateAnswer(
  instance: SweInstance,
  answer: AnswerDecision,
  options: AnswerScoringOptions = {},
): Promise<SweEvaluation> {
  const { signal } = options;
  const started = options.started ?? Date.now();
  const failToPass = instance.FAIL_TO_PASS;
  const passToPass = instance.PASS_TO_PASS;
  const source = sourceOf(instance);
  const scope = packageScope(source);
  const empty = (error: string, applied: boolean): SweEvaluation => unscored(instance, error, applied, (Date.now() - started) / 1000);
  const workspace = Workspace.create(instance, `score-${instance.instance_id}`);
  try {
    const apply = async (name: string, patch: string) => {
      const file = workspace.stage(name, patch);
      const applied = await workspace.exec(`git apply --whitespace=nowarn ${file}`, { timeoutSeconds: 60 }, signal);
      // The tests must not find the patches (the test patch names the tests that decide).
      rmSync(path.join(workspace.dir, 'io', name), { force: true });
      return applied;
    };
    if (answer.patch.trim() !== '') {
      const applied = await apply('model.patch', answer.patch);
      if (applied.exitCode !== 0) return empty(`the patch does not apply: ${applied.output.trim().slice(0, 1000)}`, false);
      // git apply reads more than git diff writes (old-style `---`/`+++` parts hidden after a hunk, for one): judge what it wrote.
      const beyond = await filesBeyond(workspace, answer.files, signal);
      if (beyond.length)
        return empty(
          `the answer is refused: applying it wrote files the answer policy did not check: ${beyond.slice(0, 20).join(', ')}`,
          false,
        );
      // The syntax tree of each Python file as the tests will import it, parsed (never run) in the sandbox by the tests' own interpreter.
      const request = options.checkSyntaxTree ? answerAstRequest(answer.patch, scope) : null;
      if (request) {
        workspace.stage(path.posix.basename(ANSWER_AST_PATH), ANSWER_AST_SOURCE);
        const requestFile = workspace.stage('harness-s-answer-ast.json', request);
        const checked = await workspace.exec(
          answerAstCommand(requestFile),
          { timeoutSeconds: ANSWER_AST_TIMEOUT_SECONDS, maxOutputBytes: 64 * 1024 },
          signal,
        );
        for (const name of [ANSWER_AST_PATH, requestFile])
          rmSync(path.join(workspace.dir, 'io', path.posix.basename(name)), { force: true });
        const refused = answerAstVerdict(checked);
        if (refused) return empty(`the answer is refused: ${refused}`, false);
      }
    }
    if (instance.test_patch.trim() !== '') {
      const applied = await apply('test.patch', instance.test_patch);
      if (applied.exitCode !== 0)
        return empty(`the test patch does not apply over the model's patch: ${applied.output.trim().slice(0, 1000)}`, true);
    }
    const canaries = plantCanaries(workspace.repo, source.test_files, {
      python: path.join(source.venv, 'bin', 'python'),
      passToPass,
      tree: source.tree,
      reservedText: instance.test_patch,
      perFile: options.canariesPerFile,
    });
    workspace.stage(path.posix.basename(RUNNER_PATH), RUNNER_SOURCE);
    const emptyConfig = workspace.stage('harness-s-pytest.ini', '[pytest]\n');
    freezeForTests(workspace.repo);
    const command = verdictCommand(source, pytestConfigFile(source.tree, source.test_files), emptyConfig);
    const result = await workspace.exec(
      command,
      { timeoutSeconds: TEST_TIMEOUT_SECONDS, maxOutputBytes: 32 * 1024 * 1024, killAfterOutputBytes: 64 * 1024 * 1024 },
      signal,
    );
    const statuses = parsePytestLog(result.output, [...failToPass, ...passToPass, ...canaries.map((c) => c.id)]);
    const canaryIds = new Set(canaries.map((c) => c.id));
    const tests: SweEvaluation['tests'] = Object.fromEntries([...statuses].filter(([id]) => !canaryIds.has(id)));
    for (const id of [...failToPass, ...passToPass]) if (!statuses.has(id)) tests[id] = 'MISSING';
    const count = (ids: readonly string[]) => ({ passed: ids.filter((id) => passes(statuses.get(id))).length, total: ids.length });
    const f2p = count(failToPass);
    const p2p = count(passToPass);
    const allPassed = f2p.passed === f2p.total && p2p.passed === p2p.total;
    const distrusted = result.timedOut || result.flooded ? null : distrust(statuses, canaries, result.exitCode, allPassed);
    const notes = [
      ...(result.timedOut
        ? [`the tests ran over ${TEST_TIMEOUT_SECONDS} s`]
        : result.flooded
          ? ['the tests wrote more output than allowed']
          : []),
      ...(distrusted ? [distrusted] : []),
      ...droppedNote(answer.dropped, scope),
    ];
    return {
      instanceId: instance.instance_id,
      resolved: allPassed && !result.timedOut && !result.flooded && distrusted === null,
      applied: true,
      error: notes.length ? notes.join('; ') : null,
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
