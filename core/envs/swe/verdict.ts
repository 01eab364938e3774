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
 * - canaries: in every test file, copies of a few of its own tests that pass
 *   before and after the fix, each with one assertion changed so that it
 *   fails (canaries.py), named from the file's own words and put among its
 *   tests at random. Code that rewrites outcomes wholesale (a patched
 *   TestReport, a no-op unittest runner, edited test functions) makes them
 *   pass, and code that spares them by a pattern has none to go by (no
 *   random-looking name, no fixed place, the same class and style as the
 *   real tests). A canary that passes, or is missing, and the run is not
 *   believed; pytest's exit status must agree with its report too.
 *
 * Nothing run in the same process as the package can be proven unforgeable:
 * code that singles out the real tests and evades the answer policy's scan
 * is not caught here (docs/swe.md says what each layer stops).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, lstatSync, readFileSync, writeFileSync } from 'node:fs';
import { isUtf8 } from 'node:buffer';
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
  const dirs = testFiles.map((f) =>
    path.posix
      .dirname(f)
      .split('/')
      .filter((p) => p !== '.'),
  );
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
  /** The id pytest reports it by (one per case of a parametrized test). */
  id: string;
  /** The real test it is a copy of (`Class::test_name`), or null for the plain canary a file gets when none of its tests can be copied. */
  source: string | null;
}

export interface CanaryOptions {
  /** The interpreter that parses the test files (the instance's venv's, the Python its tests run with). */
  python: string;
  /** The tests known to pass before and after the fix (PASS_TO_PASS): only these are copied, and their ids give the copies' ids. */
  passToPass: readonly string[];
  /** A folder whose identifiers a canary's name must not take (the base tree: a test class may inherit from another file). */
  tree?: string;
  /** More text whose identifiers are taken (the test patch). */
  reservedText?: string;
  /** Canaries per file; null copies every test that can be copied (to check them all). Default 3. */
  perFile?: number | null;
  /** For a reproducible choice (tests); a fresh random choice otherwise. */
  seed?: number;
}

const PLANTER = path.join(__dirname, 'canaries.py');

interface PlantedFile {
  file: string;
  text: string;
  fallback: string | null;
  canaries: Array<{ id: string; name: string; source: string | null; mutation: string }>;
}

/** A failing test with a random name appended to a file (not read or rewritten, whatever its encoding). */
function appendPlainCanary(host: string, file: string): Canary {
  const name = `test_${randomBytes(6).toString('hex')}`;
  const a = randomBytes(2).readUInt16BE();
  appendFileSync(host, `\n\ndef ${name}():\n    assert ${a} == ${a + 1}\n`);
  return { file, id: `${file}::${name}`, source: null };
}

/**
 * Plants canaries in each test file that exists (regular files only; see
 * canaries.py for how they are made) and returns their ids. The files are
 * read and written here; the script only parses their text, it imports
 * nothing. A file that is not UTF-8 gets the plain appended canary.
 */
export function plantCanaries(repo: string, testFiles: readonly string[], options: CanaryOptions): Canary[] {
  const canaries: Canary[] = [];
  const files: Array<{ file: string; text: string; ids: readonly string[] }> = [];
  for (const file of testFiles) {
    const host = path.join(repo, file);
    if (!existsSync(host) || !lstatSync(host).isFile()) continue;
    const bytes = readFileSync(host);
    if (!isUtf8(bytes)) canaries.push(appendPlainCanary(host, file));
    else files.push({ file, text: bytes.toString('utf8'), ids: options.passToPass.filter((id) => id.startsWith(`${file}::`)) });
  }
  if (files.length === 0) return canaries;
  const request = {
    files,
    tree: options.tree ?? null,
    reserved_text: options.reservedText ?? '',
    per_file: options.perFile === undefined ? 3 : options.perFile,
    seed: options.seed ?? null,
  };
  const result = spawnSync(options.python, ['-I', '-S', '-B', PLANTER], {
    input: JSON.stringify(request),
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
    timeout: 120_000,
  });
  if (result.error || result.status !== 0) {
    const why =
      result.error?.message ??
      `exit ${result.status}${result.signal ? ` (${result.signal})` : ''}: ${String(result.stderr).trim().split('\n').slice(-10).join('\n')}`;
    throw new Error(`planting the scoring's canaries in ${repo} with ${options.python} ${PLANTER} failed: ${why}`);
  }
  const planted = (JSON.parse(result.stdout) as { files: PlantedFile[] }).files;
  for (const entry of planted) {
    writeFileSync(path.join(repo, entry.file), entry.text);
    canaries.push(...entry.canaries.map((c) => ({ file: entry.file, id: c.id, source: c.source })));
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
    'python',
    '-I',
    RUNNER_PATH,
    [...new Set(folders)].join(':'),
    '--',
    // --color=no: a project's own config may force colour, which would hide the summary lines from the parser.
    '-rA',
    '-p',
    'no:cacheprovider',
    '--color=no',
    '-c',
    config,
    `--rootdir=${rootdir}`,
    `--confcutdir=${WORKSPACE}`,
    ...source.pytest_args,
    ...source.test_files,
  ]
    .map(quote)
    .join(' ');
}

/**
 * Why the run is not believed, or null: a canary that did not fail (whatever
 * the real tests did: under honest code a canary never passes), or, in a run
 * whose real tests all passed, a canary missing from the report (the run was
 * cut short or its report rewritten) or an exit status that is not pytest's
 * "some tests failed" (the canaries fail). A run whose real tests did not all
 * pass scores 0 anyway, and there a missing canary or another exit status
 * means a test file that did not load (an answer that breaks the package):
 * its result is reported as it is, not as tampering. (A run that timed out or
 * flooded its output is not believed before it gets here.)
 */
export function distrust(
  statuses: ReadonlyMap<string, TestStatus>,
  canaries: readonly Canary[],
  exitCode: number | null,
  allPassed: boolean,
): string | null {
  const passing = canaries.filter((c) => passes(statuses.get(c.id)) || statuses.get(c.id) === 'XPASS');
  if (passing.length)
    return `tampered with: the scoring's own failing tests were reported ${passing.map((c) => statuses.get(c.id)).join(', ')} (${passing.map((c) => c.id).join(', ')})`;
  if (!allPassed) return null;
  const missing = canaries.filter((c) => statuses.get(c.id) === undefined);
  if (missing.length)
    return `tampered with or cut short: the scoring's own failing tests were not reported (${missing.map((c) => c.id).join(', ')})`;
  if (exitCode !== 1) return `tampered with: pytest's exit status ${exitCode} disagrees with its report (failing tests, so 1)`;
  return null;
}
