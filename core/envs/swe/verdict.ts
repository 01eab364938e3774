/**
 * The test run whose result is the reward, made so that the answer's code
 * (which runs inside pytest's process) cannot simply declare itself right:
 *
 * - pytest starts from our runner under `python -I` with plugin autoload
 *   off, the venv's plugins named, an explicit config file, rootdir and
 *   confcutdir, and no cache: nothing in the workspace is imported before
 *   pytest and its plugins are;
 * - the tests run on a tree the sandbox user cannot write (a root worker
 *   gives it back to root first), so the answer cannot rewrite the test files
 *   between collections, and the patches it could read the tests from are gone;
 * - canaries: a test with a random name that must fail is appended to every
 *   test file. Code that rewrites outcomes wholesale (a patched TestReport, a
 *   wrapped runner, edited test functions) makes them pass, and the run is
 *   then not believed; pytest's exit status must agree with its report too.
 *
 * Nothing run in the same process as the package can be proven unforgeable:
 * code that singles out the real tests and evades the answer policy's scan
 * is not caught here (docs/swe.md says what each layer stops).
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, lstatSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { PYTEST_CONFIG_FILES } from './answer-policy';
import type { HarnessSSource } from './instances';
import { passes, type TestStatus } from './pytest-log';
import { WORKSPACE } from './sandbox';

export const RUNNER_SOURCE = readFileSync(path.join(__dirname, 'verdict-runner.py'), 'utf8');

/** The sections of each file that make it pytest's configuration (an empty pytest.ini counts). */
const CONFIG_SECTIONS: Record<string, RegExp | null> = {
  'pytest.toml': null,
  '.pytest.toml': null,
  'pytest.ini': null,
  '.pytest.ini': null,
  'pyproject.toml': /^\[tool\.pytest(\.ini_options)?\]/m,
  'tox.ini': /^\[pytest\]/m,
  'setup.cfg': /^\[tool:pytest\]/m,
};

/**
 * The config file pytest would use on the base tree (repository-relative),
 * found as pytest finds it: from the test files' common folder upwards, in
 * its order of names. Null when there is none.
 */
export function pytestConfigFile(tree: string, testFiles: readonly string[]): string | null {
  const dirs = testFiles.map((f) => path.posix.dirname(f).split('/').filter((p) => p !== '.'));
  const common: string[] = [];
  for (let i = 0; dirs.every((d) => i < d.length && d[i] === dirs[0][i]); i++) common.push(dirs[0][i]);
  for (let depth = common.length; depth >= 0; depth--) {
    for (const name of PYTEST_CONFIG_FILES) {
      const file = [...common.slice(0, depth), name].join('/');
      const host = path.join(tree, file);
      if (!existsSync(host) || !lstatSync(host).isFile()) continue;
      const section = CONFIG_SECTIONS[name];
      if (section === null || section.test(readFileSync(host, 'utf8'))) return file;
    }
  }
  return null;
}

export interface Canary {
  file: string;
  id: string;
}

/** Appends a failing test with a random name to each test file that exists (regular files only); returns their ids. */
export function plantCanaries(repo: string, testFiles: readonly string[]): Canary[] {
  const canaries: Canary[] = [];
  for (const file of testFiles) {
    const host = path.join(repo, file);
    if (!existsSync(host) || !lstatSync(host).isFile()) continue;
    const name = `test_${randomBytes(6).toString('hex')}`;
    const a = randomBytes(2).readUInt16BE();
    appendFileSync(host, `\n\ndef ${name}():\n    assert ${a} == ${a + 1}\n`);
    canaries.push({ file, id: `${file}::${name}` });
  }
  return canaries;
}

/** Where the runner is staged in the sandbox. */
export const RUNNER_PATH = '/io/harness-s-runner.py';

/** The test command: our runner, the instance's own config (or an empty one staged at `emptyConfig`), its test files. */
export function verdictCommand(source: HarnessSSource, configFile: string | null, emptyConfig: string): string {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const folders = [WORKSPACE, ...source.pythonpath.map((p) => path.posix.join(WORKSPACE, p))];
  const config = configFile ? path.posix.join(WORKSPACE, configFile) : emptyConfig;
  const rootdir = configFile ? path.posix.dirname(config) : WORKSPACE;
  return [
    'python', '-I', RUNNER_PATH, [...new Set(folders)].join(':'), '--',
    // --color=no: a project's own config may force colour, which would hide the summary lines from the parser.
    '-rA', '-p', 'no:cacheprovider', '--color=no', '-c', config, `--rootdir=${rootdir}`, `--confcutdir=${WORKSPACE}`,
    ...source.pytest_args, ...source.test_files,
  ].map(quote).join(' ');
}

/**
 * Why the run is not believed, or null: a canary that did not fail, or an
 * exit status that is not pytest's "some tests failed" (the canaries fail).
 * A canary missing from a run whose tests did not all pass says nothing.
 */
export function distrust(statuses: ReadonlyMap<string, TestStatus>, canaries: readonly Canary[], exitCode: number | null, allPassed: boolean): string | null {
  const passing = canaries.filter((c) => passes(statuses.get(c.id)) || statuses.get(c.id) === 'XPASS');
  if (passing.length) return `tampered with: the scoring's own failing tests were reported ${passing.map((c) => statuses.get(c.id)).join(', ')} (${passing.map((c) => c.id).join(', ')})`;
  if (!allPassed) return null;
  const missing = canaries.filter((c) => statuses.get(c.id) === undefined);
  if (missing.length) return `tampered with or cut short: the scoring's own failing tests were not reported (${missing.map((c) => c.id).join(', ')})`;
  if (exitCode !== 1) return `tampered with: pytest's exit status ${exitCode} disagrees with its report (failing tests, so 1)`;
  return null;
}
