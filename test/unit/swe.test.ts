/** The SWE env's pure parts: pytest logs, instance files, tool actions, the editor, the text repair. */
import { mkdtempSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parsePytestLog, passes } from '../../core/envs/swe/pytest-log';
import { parseInstanceSet, parseSweInstances, SweDataError } from '../../core/envs/swe/instances';
import { capOutput, DEFAULT_EDITOR_OUTPUT_BYTES, EditorError, FileEditor, parseSweAction } from '../../core/envs/swe/tools';
import { isCodePath, isTestPath } from '../../core/envs/swe/trees';
import { applyRepairs } from '../../core/harness/spec-harness';
import { applyAnswerPolicy, packageScopeOf, reachIntoTestMachinery } from '../../core/envs/swe/answer-policy';
import { distrust, pytestConfigFile } from '../../core/envs/swe/verdict';
import { execFileSync } from 'node:child_process';
import { toolCallAction } from '../../core/harness/runtime';

describe('pytest -rA logs', () => {
  const log = [
    '============================= test session starts ==============================',
    'tests/test_a.py ..F',
    '=========================== short test summary info ============================',
    'PASSED tests/test_a.py::test_one',
    'PASSED tests/test_a.py::test_param[a - b]',
    'FAILED tests/test_a.py::test_two - AssertionError: assert 1 == 2',
    'ERROR tests/test_b.py::test_setup - RuntimeError: boom',
    'XFAIL tests/test_a.py::test_known - reason: later',
    'SKIPPED [1] tests/test_a.py:40: no network',
    'PASSED tests/test_a.py::test_teardown',
    'ERROR tests/test_a.py::test_teardown - OSError: teardown',
  ].join('\n');

  test("pytest 9's failed subtests fail their test, though the test itself is reported PASSED", () => {
    const results = parsePytestLog(
      [
        'PASSED tests/t.py::T::test_many',
        'SUBFAILED(x=2) tests/t.py::T::test_many - AssertionError',
        'PASSED tests/t.py::T::test_one',
      ].join('\n'),
    );
    expect(Object.fromEntries(results)).toEqual({ 'tests/t.py::T::test_many': 'FAILED', 'tests/t.py::T::test_one': 'PASSED' });
  });

  test('each test with its status; an id holding " - " is found when the ids are known; the worse of two reports wins', () => {
    const results = parsePytestLog(log, ['tests/test_a.py::test_param[a - b]']);
    expect(Object.fromEntries(results)).toEqual({
      'tests/test_a.py::test_one': 'PASSED',
      'tests/test_a.py::test_param[a - b]': 'PASSED',
      'tests/test_a.py::test_two': 'FAILED',
      'tests/test_b.py::test_setup': 'ERROR',
      'tests/test_a.py::test_known': 'XFAIL',
      'tests/test_a.py::test_teardown': 'ERROR',
    });
    expect(passes('XFAIL')).toBe(true);
    expect(passes('XPASS')).toBe(false);
    expect(passes(undefined)).toBe(false);
  });
});

describe('instance files', () => {
  const instance = {
    instance_id: 'pkg-1.1',
    repo: 'pypi/pkg',
    base_commit: 'abc',
    problem_statement: 'it breaks',
    patch: '',
    test_patch: '',
    FAIL_TO_PASS: '["t.py::a"]',
    PASS_TO_PASS: ['t.py::b'],
    version: 1.0,
  };

  test('SWE-bench JSONL loads, its JSON-text test lists too; a bad line is named by file and line', () => {
    const [loaded] = parseSweInstances(`${JSON.stringify(instance)}\n`, 'x.jsonl');
    expect(loaded.FAIL_TO_PASS).toEqual(['t.py::a']);
    expect(loaded.version).toBe('1');
    expect(() => parseSweInstances(`${JSON.stringify(instance)}\n{"instance_id": 3}\n`, 'x.jsonl')).toThrow(
      /x\.jsonl:2 is not a SWE-bench instance:\n.*instance_id/s,
    );
    expect(() => parseSweInstances(`${JSON.stringify({ ...instance, FAIL_TO_PASS: 'not json' })}\n`, 'x.jsonl')).toThrow(
      /FAIL_TO_PASS: a list of test ids/,
    );
    expect(() => parseSweInstances(`${JSON.stringify(instance)}\n${JSON.stringify(instance)}\n`, 'x.jsonl')).toThrow(
      /instance_id 'pkg-1\.1' appears twice/,
    );
    expect(() => parseSweInstances('{oops\n', 'x.jsonl')).toThrow(SweDataError);
  });

  test('the shipped set is strict: an unknown key is named with the nearest known one', () => {
    const set = { description: '', environment: { python: '/usr/bin/python3', requirements: [] }, instances: [] };
    expect(parseInstanceSet(JSON.stringify(set), 's.json').instances).toEqual([]);
    expect(() => parseInstanceSet(JSON.stringify({ ...set, enviroment: {} }), 's.json')).toThrow(
      /enviroment: unknown; did you mean environment\?/,
    );
  });

  test('the shipped set in data/swe is valid, its ids unique, each with fail-to-pass tests and a statement', () => {
    const file = path.resolve(__dirname, '../../data/swe/instances.json');
    const set = parseInstanceSet(readFileSync(file, 'utf8'), file);
    expect(set.instances.length).toBeGreaterThan(0);
    for (const i of set.instances) {
      expect(i.FAIL_TO_PASS.length).toBeGreaterThan(0);
      expect(i.problem_statement.length).toBeGreaterThan(80);
    }
  });

  test('test and code files are told apart as SWE-bench does', () => {
    expect(isTestPath('tests/test_x.py')).toBe(true);
    expect(isTestPath('toolz/tests/test_x.py')).toBe(true);
    expect(isTestPath('pkg/conftest.py')).toBe(true);
    expect(isTestPath('pkg/core.py')).toBe(false);
    expect(isCodePath('pkg/core.py')).toBe(true);
    expect(isCodePath('six.py')).toBe(true);
    expect(isCodePath('setup.py')).toBe(false);
    expect(isCodePath('docs/conf.py')).toBe(false);
    expect(isCodePath('.idea/workspace.xml')).toBe(false);
    expect(isCodePath('CHANGELOG.md')).toBe(false);
  });
});

describe('tool actions', () => {
  test('a tool call becomes the action text, and bad calls are refused saying what is wrong', () => {
    const text = toolCallAction({ id: 'c1', type: 'function', function: { name: 'execute_bash', arguments: '{"command":"ls"}' } });
    expect(parseSweAction(text)).toEqual({ ok: true, action: { tool: 'execute_bash', arguments: { command: 'ls' } } });
    expect(parseSweAction('I think I am done')).toMatchObject({ ok: false, error: expect.stringMatching(/no tool call/) });
    expect(parseSweAction(JSON.stringify({ tool: 'rm_rf', arguments: {} }))).toMatchObject({
      ok: false,
      error: expect.stringMatching(/no tool named 'rm_rf'/),
    });
    expect(
      parseSweAction(toolCallAction({ id: 'c', type: 'function', function: { name: 'execute_bash', arguments: '{"command": ' } })),
    ).toMatchObject({ ok: false, error: expect.stringMatching(/not a JSON object/) });
    expect(
      parseSweAction(JSON.stringify({ tool: 'str_replace_editor', arguments: { command: 'str_replace', path: '/workspace/a' } })),
    ).toMatchObject({ ok: false, error: expect.stringMatching(/old_str/) });
  });

  test('tool_call_from_text recovers a call written as a <tool_call> tag or a JSON block, and leaves real calls and prose alone', () => {
    const call = { name: 'execute_bash', arguments: { command: 'ls' } };
    const want = JSON.stringify({ tool: 'execute_bash', arguments: { command: 'ls' } });
    expect(applyRepairs(`Let me look.\n<tool_call>${JSON.stringify(call)}</tool_call>`, ['tool_call_from_text'])).toEqual({
      text: want,
      repaired: true,
    });
    expect(
      applyRepairs(`\`\`\`json\n${JSON.stringify({ ...call, arguments: JSON.stringify(call.arguments) })}\n\`\`\``, [
        'tool_call_from_text',
      ]),
    ).toEqual({ text: want, repaired: true });
    expect(applyRepairs(want, ['tool_call_from_text'])).toEqual({ text: want, repaired: false });
    expect(applyRepairs('All done, thanks!', ['tool_call_from_text'])).toEqual({ text: 'All done, thanks!', repaired: false });
  });
});

describe("the answer policy: what of the model's patch is scored", () => {
  const scope = packageScopeOf(
    [
      'pkg/__init__.py',
      'pkg/core.py',
      'src/other/__init__.py',
      'single.py',
      'setup.py',
      'tests/__init__.py',
      'tests/test_x.py',
      'README.md',
    ],
    ['.'],
  );
  const part = (file: string) => `diff --git a/${file} b/${file}\n--- a/${file}\n+++ b/${file}\n@@ -1 +1 @@\n-a\n+b\n`;
  const created = (file: string, ...lines: string[]) =>
    `diff --git a/${file} b/${file}\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/${file}\n@@ -0,0 +1,${lines.length} @@\n${lines.map((l) => `+${l}\n`).join('')}`;

  test('the package is its folders with an __init__.py under the pythonpath, and its single-file modules; setup.py and tests are not', () => {
    expect(scope).toEqual({ packageDirs: ['pkg'], modules: ['single.py'] });
    expect(packageScopeOf(['src/a/__init__.py', 'src/a/x.py', 'a/__init__.py'], ['src'])).toEqual({ packageDirs: ['src/a'], modules: [] });
  });

  test('tests and test configuration are left out, and named; so is what lies outside the package (a reproduce script, the README)', () => {
    const patch = [
      part('pkg/core.py'),
      part('tests/conftest.py'),
      part('pytest.ini'),
      created('pkg/new.py', 'x = 1'),
      part('tests/test_x.py'),
      created('reproduce.py', 'print(1)'),
      part('README.md'),
      part('single.py'),
    ].join('');
    const decision = applyAnswerPolicy(patch, scope);
    expect(decision.refused).toBeNull();
    expect(decision.dropped).toEqual([
      { file: 'tests/conftest.py', why: 'protected' },
      { file: 'pytest.ini', why: 'protected' },
      { file: 'tests/test_x.py', why: 'protected' },
      { file: 'reproduce.py', why: 'outside' },
      { file: 'README.md', why: 'outside' },
    ]);
    expect(decision.patch).toBe(part('pkg/core.py') + created('pkg/new.py', 'x = 1') + part('single.py'));
  });

  test.each([
    ['sitecustomize.py', /a Python start-up hook/],
    ['pkg/usercustomize.py', /a Python start-up hook/],
    ['.local/lib/python3.11/site-packages/hook.pth', /a \.pth file/],
    ['pkg-1.0.dist-info/entry_points.txt', /packaging metadata/],
    ['pkg/__pycache__/core.cpython-311.pyc', /compiled code/],
    ['pytest.py', /shadows the test runner/],
    ['pkg/_pytest/reports.py', /shadows the test runner/],
    ['conftest.py', /a conftest\.py outside the test folders/],
    ['pkg/conftest.py', /a conftest\.py outside the test folders/],
  ])('an answer that plants %s is refused', (file, why) => {
    expect(applyAnswerPolicy(part('pkg/core.py') + created(file, 'x = 1'), scope).refused).toMatch(why);
  });

  test('symlinks, binary changes, quoted paths and unreadable headers are refused', () => {
    const symlink =
      'diff --git a/pkg/link.py b/pkg/link.py\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/pkg/link.py\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n';
    expect(applyAnswerPolicy(symlink, scope).refused).toMatch(/pkg\/link\.py: a symlink/);
    expect(
      applyAnswerPolicy(
        'diff --git a/pkg/x.dat b/pkg/x.dat\nnew file mode 100644\nindex 0000000..1111111\nGIT binary patch\nliteral 3\nKcmZ>@00961\n\n',
        scope,
      ).refused,
    ).toMatch(/a binary change/);
    expect(applyAnswerPolicy('diff --git "a/pkg/a\\tb.py" "b/pkg/a\\tb.py"\n', scope).refused).toMatch(/quotes/);
    expect(applyAnswerPolicy('junk\n' + part('pkg/core.py'), scope).refused).toMatch(/before the first file/);
  });

  test('a deletion and a mode change in the package are kept; a rename out of it is left out', () => {
    const deletion =
      'diff --git a/pkg/core.py b/pkg/core.py\ndeleted file mode 100644\nindex 1111111..0000000\n--- a/pkg/core.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n';
    const mode = 'diff --git a/pkg/core.py b/pkg/core.py\nold mode 100644\nnew mode 100755\n';
    const rename = 'diff --git a/pkg/core.py b/core.py\nsimilarity index 100%\nrename from pkg/core.py\nrename to core.py\n';
    expect(applyAnswerPolicy(deletion + mode + rename, scope)).toEqual({
      patch: deletion + mode,
      dropped: [{ file: 'core.py', why: 'outside' }],
      refused: null,
      files: ['pkg/core.py'],
    });
  });

  test('a header whose paths lack a/ and b/ is refused: git apply would strip their first folder and write outside the package', () => {
    const unprefixed = 'diff --git pkg/json.py pkg/json.py\nnew file mode 100644\n--- /dev/null\n+++ pkg/json.py\n@@ -0,0 +1 @@\n+x = 1\n';
    expect(applyAnswerPolicy(unprefixed, scope).refused).toMatch(/paths do not start with a\/ and b\//);
    const mixed = 'diff --git a/pkg/json.py b/pkg/json.py\nnew file mode 100644\n--- /dev/null\n+++ pkg/json.py\n@@ -0,0 +1 @@\n+x = 1\n';
    expect(applyAnswerPolicy(mixed, scope).refused).toMatch(/`\+\+\+` line whose path does not start with b\//);
  });

  test("pytest's hook names count as reaching into the test runner", () => {
    expect(reachIntoTestMachinery(['def pytest_collection_modifyitems(items):'])).toMatch(/the test runner/);
    expect(reachIntoTestMachinery(['def pytestish(): pass'])).toBeNull();
  });

  test.each([
    ['import _pytest.reports', /the test runner/],
    ['from pytest import TestReport', /the test runner/],
    ['m = getattr(__import__("s" + "ys"), "modules")', /the module table|the import system/],
    ['import sys; sys.modules["x"] = None', /the module table/],
    ['from tests.test_core import TestCore', /the tests themselves/],
    ['builtins.open = None', /builtins/],
    ['frame = sys._getframe(1)', /stack frames/],
    ['e.__traceback__.tb_frame.f_back', /stack frames/],
    ['import gc; gc.get_objects()', /gc, ctypes/],
    ['import ctypes', /gc, ctypes/],
    ['atexit.register(lambda: os._exit(0))', /the process/],
    ['sys.settrace(tracer)', /hooks/],
    ['sys.stdout = open(os.devnull, "w")', /hooks or the test output/],
    ['exec(code)', /built at run time/],
    ['f.__globals__["x"] = 1', /built at run time/],
    ['pickle.loads(data)', /deserialised code/],
    ['from importlib import import_module', /the import system/],
    ['f.__code__ = g.__code__', /built at run time/],
    ['# -*- coding: utf-7 -*-', /source encoding utf-7/],
  ])('added code that reaches into the test machinery is refused: %s', (line, why) => {
    expect(reachIntoTestMachinery([line])).toMatch(why);
    expect(applyAnswerPolicy(created('pkg/new.py', 'x = 1', line), scope).refused).toMatch(why);
  });

  test("ordinary library code passes the scan, and so do comments and other libraries' compile methods", () => {
    const code = [
      '# -*- coding: utf-8 -*-',
      'import re',
      'PATTERN = re.compile(r"x")',
      'value = getattr(obj, name, None)',
      '# pytest runs this',
      'self.eval_ctx = ctx',
      'sys.stdout.write(text)',
      'if sys.version_info >= (3, 8):',
      'from importlib.machinery import ModuleSpec',
      ') -> CodeType: ...',
      "if hasattr(func, '__code__'):",
    ];
    expect(reachIntoTestMachinery(code)).toBeNull();
  });
});

describe('the verdict', () => {
  const canaries = [
    { file: 't/test_a.py', id: 't/test_a.py::test_c1', source: 'test_c' },
    { file: 't/test_b.py', id: 't/test_b.py::test_c2', source: null },
  ];
  const statuses = (canary: 'FAILED' | 'PASSED' | null) =>
    new Map([['t/test_a.py::test_real', 'PASSED' as const], ...canaries.filter(() => canary).map((c) => [c.id, canary!] as const)]);

  test('is believed when every canary failed and pytest exited 1 (tests failed)', () => {
    expect(distrust(statuses('FAILED'), canaries, 1, true)).toBeNull();
  });

  test('is not believed when a canary passed (whatever the real tests did), or, when the real tests all passed, when canaries are missing or the exit status disagrees', () => {
    expect(distrust(statuses('PASSED'), canaries, 0, true)).toMatch(
      /tampered with: the scoring's own failing tests were reported PASSED, PASSED/,
    );
    expect(distrust(statuses('PASSED'), canaries, 1, false)).toMatch(/tampered with: the scoring's own failing tests were reported PASSED/);
    expect(distrust(statuses(null), canaries, 0, true)).toMatch(/not reported \(t\/test_a\.py::test_c1, t\/test_b\.py::test_c2\)/);
    expect(distrust(statuses(null), canaries, 1, true)).toMatch(/not reported/);
    expect(distrust(statuses('FAILED'), canaries, 0, true)).toMatch(/exit status 0 disagrees/);
  });

  test('reports a run whose real tests failed as it is: missing canaries there mean a test file that did not load (the answer broke the package), not tampering', () => {
    expect(distrust(statuses(null), canaries, 2, false)).toBeNull();
    expect(distrust(statuses('FAILED'), canaries, 2, false)).toBeNull();
  });

  test("pytest's config file is found as pytest finds it: from the tests' folder upwards, a pyproject.toml only with its pytest table", () => {
    const tree = mkdtempSync(path.join(os.tmpdir(), 'swe-config-'));
    mkdirSync(path.join(tree, 'tests', 'unit'), { recursive: true });
    writeFileSync(path.join(tree, 'pyproject.toml'), '[project]\nname = "x"\n');
    writeFileSync(path.join(tree, 'setup.cfg'), '[tool:pytest]\naddopts = -q\n');
    expect(pytestConfigFile(tree, ['tests/unit/test_a.py', 'tests/test_b.py'])).toBe('setup.cfg');
    writeFileSync(path.join(tree, 'tests', 'pytest.ini'), '');
    expect(pytestConfigFile(tree, ['tests/unit/test_a.py', 'tests/test_b.py'])).toBe('tests/pytest.ini');
    expect(pytestConfigFile(mkdtempSync(path.join(os.tmpdir(), 'swe-config-')), ['tests/test_b.py'])).toBeNull();
  });
});

describe('the editor', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'swe-editor-'));
  mkdirSync(path.join(root, 'pkg'));
  writeFileSync(path.join(root, 'pkg', 'a.py'), 'x = 1\ny = 2\nx = 1\n');
  const outside = mkdtempSync(path.join(os.tmpdir(), 'swe-outside-'));
  writeFileSync(path.join(outside, 'secret'), 'secret');
  symlinkSync(path.join(outside, 'secret'), path.join(root, 'link'));
  symlinkSync(outside, path.join(root, 'dirlink'));
  const editor = new FileEditor(root);

  test('view, str_replace (unique only), insert, create and undo_edit', async () => {
    expect(await editor.run({ command: 'view', path: '/workspace/pkg/a.py' })).toContain('     2\ty = 2');
    await expect(editor.run({ command: 'str_replace', path: '/workspace/pkg/a.py', old_str: 'x = 1', new_str: 'x = 3' })).rejects.toThrow(
      /occurs 2 times/,
    );
    await expect(editor.run({ command: 'str_replace', path: '/workspace/pkg/a.py', old_str: 'z', new_str: '' })).rejects.toThrow(
      /does not occur/,
    );
    await editor.run({ command: 'str_replace', path: '/workspace/pkg/a.py', old_str: 'y = 2', new_str: 'y = 5' });
    await editor.run({ command: 'insert', path: '/workspace/pkg/a.py', insert_line: 0, new_str: '# head' });
    expect(readFileSync(path.join(root, 'pkg', 'a.py'), 'utf8')).toBe('# head\nx = 1\ny = 5\nx = 1\n');
    await editor.run({ command: 'undo_edit', path: '/workspace/pkg/a.py' });
    expect(readFileSync(path.join(root, 'pkg', 'a.py'), 'utf8')).toBe('x = 1\ny = 5\nx = 1\n');
    await editor.run({ command: 'create', path: '/workspace/pkg/sub/new.py', file_text: 'z = 0\n' });
    expect(readFileSync(path.join(root, 'pkg', 'sub', 'new.py'), 'utf8')).toBe('z = 0\n');
    await expect(editor.run({ command: 'create', path: '/workspace/pkg/a.py', file_text: '' })).rejects.toThrow(/already exists/);
    expect(await editor.run({ command: 'view', path: '/workspace' })).toMatch(/^\/workspace\/pkg\/sub\/$/m);
  });

  test('a pipe is refused (reading it would block the worker), and file-system errors come back as editor errors', async () => {
    execFileSync('mkfifo', [path.join(root, 'pipe')]);
    await expect(editor.run({ command: 'view', path: '/workspace/pipe' })).rejects.toThrow(/not a regular file/);
    await expect(editor.run({ command: 'str_replace', path: '/workspace/pipe', old_str: 'a', new_str: 'b' })).rejects.toThrow(
      /not a regular file/,
    );
    await expect(editor.run({ command: 'create', path: '/workspace/pkg/a.py/x.py', file_text: 'x' })).rejects.toThrow(
      /a part of the path is a file/,
    );
  });

  test('paths outside /workspace, and symlinks leading out, are refused', async () => {
    await expect(editor.run({ command: 'view', path: '/etc/passwd' })).rejects.toThrow(EditorError);
    await expect(editor.run({ command: 'view', path: '/workspace/../etc/passwd' })).rejects.toThrow(/outside \/workspace/);
    await expect(editor.run({ command: 'view', path: 'pkg/a.py' })).rejects.toThrow(/absolute path/);
    await expect(editor.run({ command: 'view', path: '/workspace/link' })).rejects.toThrow(/leads outside/);
    await expect(editor.run({ command: 'create', path: '/workspace/dirlink/new', file_text: 'x' })).rejects.toThrow(/leads outside/);
    await expect(editor.run({ command: 'str_replace', path: '/workspace/link', old_str: 'secret', new_str: 'pwned' })).rejects.toThrow(
      /leads outside/,
    );
    expect(readFileSync(path.join(outside, 'secret'), 'utf8')).toBe('secret');
  });

  test('a one-line file of 4 MB is shown cut to the output cap, with a note', async () => {
    writeFileSync(path.join(root, 'pkg', 'blob.js'), 'a'.repeat(4 * 1024 * 1024));
    const shown = await editor.run({ command: 'view', path: '/workspace/pkg/blob.js' });
    expect(Buffer.byteLength(shown)).toBeLessThan(DEFAULT_EDITOR_OUTPUT_BYTES + 300);
    expect(shown).toMatch(/\[output cut: 4194\d{3} bytes in all, the first 16384 shown/);
  });

  test('a folder of thousands of entries is listed up to the output cap, with a note', async () => {
    const many = path.join(root, 'many');
    mkdirSync(many);
    for (let i = 0; i < 5000; i++) writeFileSync(path.join(many, `file-${String(i).padStart(5, '0')}.txt`), '');
    const shown = await editor.run({ command: 'view', path: '/workspace/many' });
    expect(Buffer.byteLength(shown)).toBeLessThan(DEFAULT_EDITOR_OUTPUT_BYTES + 300);
    expect(shown).toMatch(/^\/workspace\/many\/file-00000\.txt$/m);
    expect(shown).toMatch(/\[listing cut at \d+ bytes: view a subfolder/);
  });

  test('cutting output never leaves half a character', () => {
    expect(capOutput('ééé', 3)).toMatch(/^é\n\[output cut: 6 bytes in all, the first 3 shown/);
    expect(capOutput('short', 10)).toBe('short');
  });
});
