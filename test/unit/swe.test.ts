/** The SWE env's pure parts: pytest logs, instance files, tool actions, the editor, the text repair. */
import { mkdtempSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parsePytestLog, passes } from '../../core/envs/swe/pytest-log';
import { parseInstanceSet, parseSweInstances, SweDataError } from '../../core/envs/swe/instances';
import { EditorError, FileEditor, parseSweAction } from '../../core/envs/swe/tools';
import { isCodePath, isTestPath } from '../../core/envs/swe/trees';
import { applyRepairs } from '../../core/harness/spec-harness';
import { withoutProtectedFiles } from '../../core/envs/swe/scoring';
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
    const results = parsePytestLog(['PASSED tests/t.py::T::test_many', 'SUBFAILED(x=2) tests/t.py::T::test_many - AssertionError', 'PASSED tests/t.py::T::test_one'].join('\n'));
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
    instance_id: 'pkg-1.1', repo: 'pypi/pkg', base_commit: 'abc', problem_statement: 'it breaks', patch: '', test_patch: '',
    FAIL_TO_PASS: '["t.py::a"]', PASS_TO_PASS: ['t.py::b'], version: 1.0,
  };

  test('SWE-bench JSONL loads, its JSON-text test lists too; a bad line is named by file and line', () => {
    const [loaded] = parseSweInstances(`${JSON.stringify(instance)}\n`, 'x.jsonl');
    expect(loaded.FAIL_TO_PASS).toEqual(['t.py::a']);
    expect(loaded.version).toBe('1');
    expect(() => parseSweInstances(`${JSON.stringify(instance)}\n{"instance_id": 3}\n`, 'x.jsonl')).toThrow(/x\.jsonl:2 is not a SWE-bench instance:\n.*instance_id/s);
    expect(() => parseSweInstances(`${JSON.stringify({ ...instance, FAIL_TO_PASS: 'not json' })}\n`, 'x.jsonl')).toThrow(/FAIL_TO_PASS: a list of test ids/);
    expect(() => parseSweInstances(`${JSON.stringify(instance)}\n${JSON.stringify(instance)}\n`, 'x.jsonl')).toThrow(/instance_id 'pkg-1\.1' appears twice/);
    expect(() => parseSweInstances('{oops\n', 'x.jsonl')).toThrow(SweDataError);
  });

  test('the shipped set is strict: an unknown key is named with the nearest known one', () => {
    const set = { description: '', environment: { python: '/usr/bin/python3', requirements: [] }, instances: [] };
    expect(parseInstanceSet(JSON.stringify(set), 's.json').instances).toEqual([]);
    expect(() => parseInstanceSet(JSON.stringify({ ...set, enviroment: {} }), 's.json')).toThrow(/enviroment: unknown; did you mean environment\?/);
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
    expect(parseSweAction(JSON.stringify({ tool: 'rm_rf', arguments: {} }))).toMatchObject({ ok: false, error: expect.stringMatching(/no tool named 'rm_rf'/) });
    expect(parseSweAction(toolCallAction({ id: 'c', type: 'function', function: { name: 'execute_bash', arguments: '{"command": ' } }))).toMatchObject({ ok: false, error: expect.stringMatching(/not a JSON object/) });
    expect(parseSweAction(JSON.stringify({ tool: 'str_replace_editor', arguments: { command: 'str_replace', path: '/workspace/a' } }))).toMatchObject({ ok: false, error: expect.stringMatching(/old_str/) });
  });

  test('tool_call_from_text recovers a call written as a <tool_call> tag or a JSON block, and leaves real calls and prose alone', () => {
    const call = { name: 'execute_bash', arguments: { command: 'ls' } };
    const want = JSON.stringify({ tool: 'execute_bash', arguments: { command: 'ls' } });
    expect(applyRepairs(`Let me look.\n<tool_call>${JSON.stringify(call)}</tool_call>`, ['tool_call_from_text'])).toEqual({ text: want, repaired: true });
    expect(applyRepairs(`\`\`\`json\n${JSON.stringify({ ...call, arguments: JSON.stringify(call.arguments) })}\n\`\`\``, ['tool_call_from_text'])).toEqual({ text: want, repaired: true });
    expect(applyRepairs(want, ['tool_call_from_text'])).toEqual({ text: want, repaired: false });
    expect(applyRepairs('All done, thanks!', ['tool_call_from_text'])).toEqual({ text: 'All done, thanks!', repaired: false });
  });
});

describe("the model's patch", () => {
  test('loses its hunks on tests and test configuration, which are named', () => {
    const part = (file: string) => `diff --git a/${file} b/${file}\n--- a/${file}\n+++ b/${file}\n@@ -1 +1 @@\n-a\n+b\n`;
    const patch = [part('pkg/core.py'), part('tests/conftest.py'), part('pytest.ini'), part('pkg/util.py'), part('tests/test_x.py')].join('');
    const { patch: kept, dropped } = withoutProtectedFiles(patch);
    expect(dropped).toEqual(['tests/conftest.py', 'pytest.ini', 'tests/test_x.py']);
    expect(kept).toBe(part('pkg/core.py') + part('pkg/util.py'));
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

  test('view, str_replace (unique only), insert, create and undo_edit', () => {
    expect(editor.run({ command: 'view', path: '/workspace/pkg/a.py' })).toContain('     2\ty = 2');
    expect(() => editor.run({ command: 'str_replace', path: '/workspace/pkg/a.py', old_str: 'x = 1', new_str: 'x = 3' })).toThrow(/occurs 2 times/);
    expect(() => editor.run({ command: 'str_replace', path: '/workspace/pkg/a.py', old_str: 'z', new_str: '' })).toThrow(/does not occur/);
    editor.run({ command: 'str_replace', path: '/workspace/pkg/a.py', old_str: 'y = 2', new_str: 'y = 5' });
    editor.run({ command: 'insert', path: '/workspace/pkg/a.py', insert_line: 0, new_str: '# head' });
    expect(readFileSync(path.join(root, 'pkg', 'a.py'), 'utf8')).toBe('# head\nx = 1\ny = 5\nx = 1\n');
    editor.run({ command: 'undo_edit', path: '/workspace/pkg/a.py' });
    expect(readFileSync(path.join(root, 'pkg', 'a.py'), 'utf8')).toBe('x = 1\ny = 5\nx = 1\n');
    editor.run({ command: 'create', path: '/workspace/pkg/sub/new.py', file_text: 'z = 0\n' });
    expect(readFileSync(path.join(root, 'pkg', 'sub', 'new.py'), 'utf8')).toBe('z = 0\n');
    expect(() => editor.run({ command: 'create', path: '/workspace/pkg/a.py', file_text: '' })).toThrow(/already exists/);
    expect(editor.run({ command: 'view', path: '/workspace' })).toMatch(/^\/workspace\/pkg\/sub\/$/m);
  });

  test('a pipe is refused (reading it would block the worker), and file-system errors come back as editor errors', () => {
    execFileSync('mkfifo', [path.join(root, 'pipe')]);
    expect(() => editor.run({ command: 'view', path: '/workspace/pipe' })).toThrow(/not a regular file/);
    expect(() => editor.run({ command: 'str_replace', path: '/workspace/pipe', old_str: 'a', new_str: 'b' })).toThrow(/not a regular file/);
    expect(() => editor.run({ command: 'create', path: '/workspace/pkg/a.py/x.py', file_text: 'x' })).toThrow(/a part of the path is a file/);
  });

  test('paths outside /workspace, and symlinks leading out, are refused', () => {
    expect(() => editor.run({ command: 'view', path: '/etc/passwd' })).toThrow(EditorError);
    expect(() => editor.run({ command: 'view', path: '/workspace/../etc/passwd' })).toThrow(/outside \/workspace/);
    expect(() => editor.run({ command: 'view', path: 'pkg/a.py' })).toThrow(/absolute path/);
    expect(() => editor.run({ command: 'view', path: '/workspace/link' })).toThrow(/leads outside/);
    expect(() => editor.run({ command: 'create', path: '/workspace/dirlink/new', file_text: 'x' })).toThrow(/leads outside/);
    expect(() => editor.run({ command: 'str_replace', path: '/workspace/link', old_str: 'secret', new_str: 'pwned' })).toThrow(/leads outside/);
    expect(readFileSync(path.join(outside, 'secret'), 'utf8')).toBe('secret');
  });
});
