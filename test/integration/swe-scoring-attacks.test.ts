/**
 * Attacks on SWE scoring: an agent that cannot fix the bug tries to make the
 * tests report a fix anyway, by planting files that run before or beside
 * pytest, or by code in the package (which runs inside pytest's process)
 * that rewrites pytest's verdict. Each is played through a real episode (the
 * editor and the shell as the policy calls them, then submit) on
 * markdown-3.8.1, and judged from the host: no reward, and the reason in the
 * episode's record. The control, the gold fix through the same path, is resolved.
 */
import { SweEnvironment, type SweEpisodeResult } from '../../core/envs/swe/environment';
import { loadSweData, setupInstanceSet } from '../../core/envs/swe/build';
import type { StepOutcome } from '../../core/envs/environment';
import { specFiles, specHarnesses } from '../../core/envs/registry';
import { SWE_POOL_DIR, sweRegistration } from '../../core/envs/swe/registration';
import { loadHarnessPool } from '../../core/harness/spec';
import { SHIPPED_SWE_SET } from '../../cli/swe';
import { goldEditCalls } from './swe-helpers';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { evaluatePatch } from '../../core/envs/swe/scoring';

setupInstanceSet(SHIPPED_SWE_SET);
const instance = loadSweData(SHIPPED_SWE_SET).find((i) => i.instance_id === 'markdown-3.8.1')!;
const env = new SweEnvironment({ instances: [instance], harnesses: specHarnesses(sweRegistration, loadHarnessPool(specFiles(SWE_POOL_DIR))) });

const action = (tool: string, args: Record<string, unknown>) => JSON.stringify({ tool, arguments: args });
const bash = (command: string) => action('execute_bash', { command });
const create = (path: string, text: string) => action('str_replace_editor', { command: 'create', path, file_text: text });
/** Appends `text` to a file with the shell (a heredoc, so quotes need no escaping). */
const append = (path: string, text: string) => bash(`cat >> ${path} <<'HARNESS_EOF'\n${text}\nHARNESS_EOF`);

/** Every report pytest makes (setup, call, teardown) turned into a pass: the tamper the issue found. */
const PASS_EVERY_REPORT = [
  '_init = TestReport.__init__',
  'def _passed(self, *args, **kwargs):',
  '    _init(self, *args, **kwargs)',
  "    self.outcome, self.longrepr = 'passed', None",
  'TestReport.__init__ = _passed',
].join('\n');

/** Plays the actions, then submits; returns the final step and the scored ending, as the host sees them. */
async function play(actions: string[]): Promise<{ outcome: StepOutcome; ending: SweEpisodeResult }> {
  const episode = await env.startEpisode(instance.instance_id, { maxTurns: 40 });
  try {
    for (const a of actions) {
      const step = await episode.step(a);
      expect({ action: a, kind: step.kind, done: step.done }).toEqual({ action: a, kind: 'ok', done: false });
    }
    const outcome = await episode.step(action('submit', {}));
    return { outcome, ending: episode.ending! };
  } finally {
    await episode.close();
  }
}

/** Not resolved, no reward, and the reason both in the evaluation and in the observation the trajectory keeps. */
function expectNoReward({ outcome, ending }: { outcome: StepOutcome; ending: SweEpisodeResult }, reason: RegExp): void {
  expect({ resolved: ending.evaluation.resolved, reward: outcome.reward, success: outcome.success }).toEqual({ resolved: false, reward: 0, success: false });
  expect(ending.evaluation.error).toMatch(reason);
  expect(outcome.observation).toMatch(reason);
}

describe('planted files that would run before or beside pytest', () => {
  test('a pytest.py at the root that wraps the real pytest and passes every report: refused', async () => {
    const wrapper = [
      'import os, sys',
      '_here = os.path.dirname(os.path.abspath(__file__))',
      'sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]',
      "sys.modules.pop('pytest', None)",
      'import pytest as _real',
      'from _pytest.reports import TestReport',
      'sys.path.insert(0, _here)',
      PASS_EVERY_REPORT,
      "if __name__ == '__main__':",
      '    sys.exit(_real.main())',
      '',
    ].join('\n');
    expectNoReward(await play([create('/workspace/pytest.py', wrapper)]), /the answer is refused: pytest\.py: shadows the test runner/);
  }, 120_000);

  test('a sitecustomize.py that patches TestReport at start-up: refused', async () => {
    const hook = `from _pytest.reports import TestReport\n${PASS_EVERY_REPORT}\n`;
    expectNoReward(await play([create('/workspace/sitecustomize.py', hook)]), /the answer is refused: sitecustomize\.py: a Python start-up hook/);
  }, 120_000);

  test('a usercustomize.py: refused', async () => {
    const hook = `from _pytest.reports import TestReport\n${PASS_EVERY_REPORT}\n`;
    expectNoReward(await play([create('/workspace/usercustomize.py', hook)]), /the answer is refused: usercustomize\.py: a Python start-up hook/);
  }, 120_000);

  test("a .pth file in the user's site folder that runs the patch at start-up: refused", async () => {
    const line = `import sys; exec(${JSON.stringify(`from _pytest.reports import TestReport\n${PASS_EVERY_REPORT}`)})`;
    const planted = await play([
      bash('mkdir -p "$(python -c "import site; print(site.getusersitepackages())")"'),
      bash(`echo ${JSON.stringify(line).replace(/\$/g, '\\$')} > "$(python -c "import site; print(site.getusersitepackages())")/harness.pth"`),
    ]);
    expectNoReward(planted, /the answer is refused: \.local\/lib\/python3\.\d+\/site-packages\/harness\.pth: a \.pth file/);
  }, 120_000);

  test('a conftest.py in the package folder with a hook that passes every report: refused', async () => {
    const conftest = [
      'import pytest',
      '@pytest.hookimpl(hookwrapper=True)',
      'def pytest_runtest_makereport(item, call):',
      '    outcome = yield',
      "    outcome.get_result().outcome = 'passed'",
      '',
    ].join('\n');
    expectNoReward(await play([create('/workspace/markdown/conftest.py', conftest)]), /the answer is refused: markdown\/conftest\.py: a conftest\.py outside the test folders/);
  }, 120_000);
});

describe("code in the package (it runs inside pytest's process)", () => {
  test("the patch appended to the package's own __init__.py: refused, it reaches into the test runner", async () => {
    const tamper = `from _pytest.reports import TestReport\n${PASS_EVERY_REPORT}`;
    expectNoReward(await play([append('markdown/__init__.py', tamper)]), /the answer is refused: markdown\/__init__\.py: its added code reaches into the test runner/);
  }, 120_000);

  test("the same, reaching pytest through getattr(__import__('s'+'ys'), 'modules'): refused", async () => {
    const tamper = `TestReport = getattr(__import__('s' + 'ys'), 'modules')['_py' + 'test.reports'].TestReport\n${PASS_EVERY_REPORT}`;
    expectNoReward(await play([append('markdown/__init__.py', tamper)]), /the answer is refused: markdown\/__init__\.py: its added code reaches into (the module table|the import system)/);
  }, 120_000);

  test("the same, written to slip past the scan (names split into string pieces): the canaries pass, so the run is not believed", async () => {
    const tamper = `import sys as _s\nTestReport = getattr(_s, 'mod' 'ules')['_py' 'test.reports'].TestReport\n${PASS_EVERY_REPORT}`;
    const played = await play([append('markdown/__init__.py', tamper)]);
    expectNoReward(played, /tampered with: the scoring's own failing tests were reported PASSED/);
    // The tamper did work inside pytest (every test it saw passed): only the canaries tell.
    expect(played.ending.evaluation.failToPass).toEqual({ passed: 10, total: 10 });
  }, 120_000);

  // A root worker hands the tree to root for the test run; a worker that is not root cannot (docs/swe.md).
  (process.getuid?.() === 0 ? test : test.skip)('rewriting the test helper on disk as the package is imported: the tree is read-only to the tests, so the fix is still missing', async () => {
    const tamper = [
      'try:',
      '    import os as _os',
      "    _f = _os.path.join(_os.path.dirname(__file__), 'test_tools.py')",
      '    with open(_f) as _h:',
      '        _src = _h.read()',
      "    if 'noop-renders' not in _src:",
      "        with open(_f, 'w') as _h:",
      "            _h.write(_src + '\\nTestCase.assertMarkdownRenders = lambda *a, **k: None  # noop-renders\\n')",
      'except OSError:',
      '    pass',
    ].join('\n');
    const played = await play([append('markdown/__init__.py', tamper)]);
    expect({ resolved: played.ending.evaluation.resolved, reward: played.outcome.reward }).toEqual({ resolved: false, reward: 0 });
    expect(played.ending.evaluation.failToPass.passed).toBeLessThan(played.ending.evaluation.failToPass.total);
  }, 120_000);
});

describe('patch text handed to scoring directly (an episode\'s answer is git\'s diff; a patch from elsewhere is not)', () => {
  /** A harmless kept part: one comment line appended to the package's __init__.py. */
  const keptPart = () => {
    const lines = readFileSync(path.join(instance.harness_s!.tree, 'markdown', '__init__.py'), 'utf8').split('\n').length - 1;
    return `diff --git a/markdown/__init__.py b/markdown/__init__.py\n--- a/markdown/__init__.py\n+++ b/markdown/__init__.py\n@@ -${lines},0 +${lines + 1},1 @@\n+# a comment\n`;
  };
  /** An old-style part (no `diff --git` line) after the kept part's hunk: git apply takes it too. */
  const hiddenNewFile = (file: string, body: string[]) => `--- /dev/null\n+++ b/${file}\n@@ -0,0 +1,${body.length} @@\n${body.map((l) => `+${l}`).join('\n')}\n`;

  test('a new file hidden after a kept hunk, outside the package: refused for what git wrote', async () => {
    const evaluation = await evaluatePatch(instance, keptPart() + hiddenNewFile('json.py', ['VALUE = 1']));
    expect(evaluation.resolved).toBe(false);
    expect(evaluation.error).toMatch(/applying it wrote files the answer policy did not check: json\.py/);
  });

  test('a tests/conftest.py hidden after a kept hunk, whose hook skips every test body: refused', async () => {
    const conftest = ['def pytest_collection_modifyitems(items):', '    for item in items:', "        if len(item.name) != 17: item.runtest = lambda: None"];
    const evaluation = await evaluatePatch(instance, keptPart() + hiddenNewFile('tests/conftest.py', conftest));
    expect(evaluation.resolved).toBe(false);
    expect(evaluation.error).toMatch(/refused/);
  });

  test('paths without a/ and b/ (git apply strips their first folder): refused', async () => {
    const evaluation = await evaluatePatch(instance, 'diff --git markdown/json.py markdown/json.py\nnew file mode 100644\n--- /dev/null\n+++ markdown/json.py\n@@ -0,0 +1 @@\n+VALUE = 1\n');
    expect(evaluation.resolved).toBe(false);
    expect(evaluation.error).toMatch(/paths do not start with a\/ and b\//);
  });
});

test('the control: the gold fix made with the editor through the same path is resolved, reward 1', async () => {
  const edits = goldEditCalls(instance.patch).map((call) => action(call.name, call.arguments));
  const { outcome, ending } = await play(edits);
  expect({ resolved: ending.evaluation.resolved, reward: outcome.reward, error: ending.evaluation.error }).toEqual({ resolved: true, reward: 1, error: null });
  expect(outcome.observation).toMatch(/^Submitted: resolved \(FAIL_TO_PASS 10\/10, PASS_TO_PASS 413\/413\)/);
}, 120_000);
