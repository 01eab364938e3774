/**
 * Source trees rebuilt from PyPI: a release's sdist, downloaded with pip,
 * unpacked and made a git repository, kept under the SWE home so every clone
 * on a machine reuses it; and the venv the tests run in.
 *
 * The SWE home must be readable by the sandbox user: $HARNESS_S_SWE_HOME,
 * default ~/.cache/harness-s/swe, or /var/cache/harness-s/swe for root (whose
 * home the sandbox user, nobody, cannot enter).
 */
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SweDataError } from './instances';

export function sweHome(): string {
  if (process.env.HARNESS_S_SWE_HOME) return path.resolve(process.env.HARNESS_S_SWE_HOME);
  if (process.getuid?.() === 0) return '/var/cache/harness-s/swe';
  return path.join(os.homedir(), '.cache', 'harness-s', 'swe');
}

/**
 * The folder trees are kept in, named by how they are made: a change to that
 * makes new trees (and new built sets) rather than reusing old ones. trees-2:
 * trees made before the diff kept its objects apart held the newer release's
 * files as loose objects.
 */
export const TREES_FOLDER = 'trees-2';

export function shortHash(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 12);
}

/** A fixed author and date, so the same tree always gets the same commit (its base_commit). */
const GIT_ENV = {
  GIT_AUTHOR_NAME: 'harness-s',
  GIT_AUTHOR_EMAIL: 'harness-s@localhost',
  GIT_COMMITTER_NAME: 'harness-s',
  GIT_COMMITTER_EMAIL: 'harness-s@localhost',
  GIT_AUTHOR_DATE: '2000-01-01T00:00:00Z',
  GIT_COMMITTER_DATE: '2000-01-01T00:00:00Z',
};

/** What the agent's own runs leave behind and is never part of a patch. */
const IGNORED = ['__pycache__/', '*.pyc', '.pytest_cache/', '*.egg-info/', '.hypothesis/', '.tox/', '.mypy_cache/'];

export function run(command: string, args: string[], options: SpawnSyncOptions & { what: string }): string {
  const result = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, ...options });
  if (result.error) throw new SweDataError(`${options.what}: cannot run ${command}: ${result.error.message}`);
  if (result.status !== 0) {
    const output = `${String(result.stdout ?? '')}${String(result.stderr ?? '')}`.trim().split('\n').slice(-15).join('\n');
    throw new SweDataError(`${options.what}: \`${command} ${args.join(' ')}\` failed (exit ${result.status}):\n${output}`);
  }
  return String(result.stdout ?? '');
}

/** The pip that downloads and installs: $HARNESS_S_PIP_PYTHON's, default python3's. */
function pipPython(): string {
  return process.env.HARNESS_S_PIP_PYTHON || 'python3';
}

/** The sdist of `pkg==version`, downloaded once (pip download, source only, no dependencies). */
export function downloadSdist(pkg: string, version: string): string {
  const dir = path.join(sweHome(), 'sdists', `${pkg}-${version}`);
  const archive = () => (existsSync(dir) ? readdirSync(dir).find((f) => /\.(tar\.gz|tgz|zip|tar\.bz2)$/.test(f)) : undefined);
  if (!archive()) {
    mkdirSync(dir, { recursive: true });
    const download = (isolated: boolean) =>
      run(
        pipPython(),
        [
          '-m',
          'pip',
          'download',
          '--no-deps',
          '--no-binary',
          ':all:',
          ...(isolated ? [] : ['--no-build-isolation']),
          '--disable-pip-version-check',
          '-q',
          '-d',
          dir,
          `${pkg}==${version}`,
        ],
        {
          what: `downloading ${pkg} ${version} from PyPI`,
        },
      );
    // pip prepares an sdist's metadata with its build backend: the host's when it has it (seconds), else in an isolated environment (tens of seconds).
    try {
      download(false);
    } catch {
      download(true);
    }
  }
  const found = archive();
  if (!found) throw new SweDataError(`${pkg} ${version}: pip left no source archive in ${dir}`);
  return path.join(dir, found);
}

/** The unpacked release as a git repository with one commit; returns the tree's folder. */
export function releaseTree(pkg: string, version: string): string {
  const tree = path.join(sweHome(), TREES_FOLDER, `${pkg}-${version}`);
  if (existsSync(path.join(tree, '.git', 'HEAD'))) return tree;
  const archive = downloadSdist(pkg, version);
  const parent = path.dirname(tree);
  mkdirSync(parent, { recursive: true });
  const scratch = mkdtempSync(path.join(parent, '.unpack-'));
  try {
    if (archive.endsWith('.zip')) run(pipPython(), ['-m', 'zipfile', '-e', archive, scratch], { what: `unpacking ${archive}` });
    else run('tar', ['--no-same-owner', '-xf', archive, '-C', scratch], { what: `unpacking ${archive}` });
    const entries = readdirSync(scratch);
    const root = entries.length === 1 ? path.join(scratch, entries[0]) : scratch;
    const git = (...args: string[]) =>
      run('git', ['-c', 'safe.directory=*', ...args], {
        cwd: root,
        what: `making ${pkg} ${version} a git repository`,
        env: { ...process.env, ...GIT_ENV },
      });
    git('init', '-q');
    writeFileSync(path.join(root, '.git', 'info', 'exclude'), `${IGNORED.join('\n')}\n`);
    git('add', '-A');
    git('-c', 'commit.gpgsign=false', 'commit', '-q', '--no-verify', '-m', `${pkg} ${version} (sdist from PyPI)`);
    rmSync(tree, { recursive: true, force: true });
    renameSync(root, tree);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  return tree;
}

export function headCommit(tree: string): string {
  return run('git', ['-c', 'safe.directory=*', 'rev-parse', 'HEAD'], { cwd: tree, what: `reading ${tree}'s commit` }).trim();
}

/** A test file, by SWE-bench's convention: under a tests folder, or named test_*.py / *_test.py / conftest.py. */
export function isTestPath(file: string): boolean {
  const parts = file.split('/');
  const base = parts[parts.length - 1];
  return (
    parts.slice(0, -1).some((p) => /^(tests?|testing)$/.test(p)) ||
    /^test_.*\.py$/.test(base) ||
    /_test\.py$/.test(base) ||
    base === 'conftest.py'
  );
}

/** Library code: Python sources and package data outside tests, docs and the packaging metadata. */
export function isCodePath(file: string): boolean {
  if (isTestPath(file)) return false;
  const parts = file.split('/');
  if (parts.some((p) => p.startsWith('.') || /^(docs?|.*\.egg-info|benchmarks?|examples?)$/i.test(p))) return false;
  if (parts.length === 1) return file.endsWith('.py') && file !== 'setup.py' && file !== 'conftest.py';
  return true;
}

export interface ReleaseDiff {
  /** The library code's diff: the gold patch. */
  patch: string;
  /** The tests' diff: the test patch. */
  testPatch: string;
  codeFiles: string[];
  testFiles: string[];
}

/** The diff from `before` to `after`, split into code and tests (files that are neither are left out). */
export function releaseDiff(pkg: string, before: string, after: string): ReleaseDiff {
  const from = releaseTree(pkg, before);
  const to = releaseTree(pkg, after);
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'harness-s-diff-'));
  try {
    const index = path.join(scratch, 'index');
    // The newer release's files go to a throwaway object store: written into the older tree's repository,
    // they would sit there as loose objects, and the agent, who gets that repository, could read the fix.
    const objects = path.join(scratch, 'objects');
    mkdirSync(objects);
    const git = (...args: string[]) =>
      run('git', ['-c', 'safe.directory=*', '--git-dir', path.join(from, '.git'), '--work-tree', to, ...args], {
        what: `diffing ${pkg} ${before} -> ${after}`,
        env: {
          ...process.env,
          GIT_INDEX_FILE: index,
          GIT_OBJECT_DIRECTORY: objects,
          GIT_ALTERNATE_OBJECT_DIRECTORIES: path.join(from, '.git', 'objects'),
        },
      });
    git('read-tree', 'HEAD');
    git('add', '-A');
    const changed = git('diff', '--cached', '--name-only', 'HEAD').split('\n').filter(Boolean);
    const codeFiles = changed.filter(isCodePath);
    const testFiles = changed.filter(isTestPath);
    const diff = (files: string[]) =>
      files.length ? git('diff', '--cached', '--binary', '--no-color', '--no-ext-diff', 'HEAD', '--', ...files) : '';
    return { patch: diff(codeFiles), testPatch: diff(testFiles), codeFiles, testFiles };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * The venv tests run in: made with `python` (an interpreter the sandbox user
 * can read, e.g. Debian's /usr/bin/python3), without pip; the requirements are
 * installed into it by the host's pip (`pip --python`).
 */
export function testVenv(python: string, requirements: readonly string[]): string {
  const venv = path.join(sweHome(), 'venvs', shortHash({ python, requirements }));
  const marker = path.join(venv, '.harness-s-complete');
  if (existsSync(marker)) return venv;
  rmSync(venv, { recursive: true, force: true });
  mkdirSync(path.dirname(venv), { recursive: true });
  run(python, ['-m', 'venv', '--without-pip', venv], { what: `making the SWE test venv with ${python}` });
  run(
    pipPython(),
    ['-m', 'pip', '--python', path.join(venv, 'bin', 'python'), 'install', '-q', '--disable-pip-version-check', ...requirements],
    {
      what: `installing the SWE test requirements into ${venv}`,
    },
  );
  writeFileSync(marker, `${JSON.stringify({ python, requirements })}\n`);
  return venv;
}

/** A PyPI name as PEP 503 compares them: lower case, runs of -, _ and . as one -. */
export function normalizePackage(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, '-');
}

/** The (normalized) names of the distributions installed in a venv. */
export function installedPackages(venv: string): Set<string> {
  const names = new Set<string>();
  const lib = path.join(venv, 'lib');
  for (const python of existsSync(lib) ? readdirSync(lib) : []) {
    const site = path.join(lib, python, 'site-packages');
    for (const entry of existsSync(site) ? readdirSync(site) : []) {
      const match = /^(.+?)-[^-]+\.dist-info$/.exec(entry);
      if (match) names.add(normalizePackage(match[1]));
    }
  }
  return names;
}

/** The folder of the interpreter a venv was made from, to mount beside the venv (nothing when it is under /usr). */
const prefixes = new Map<string, string | null>();

/** Asked once per venv and process: the answer does not change while the venv stands. */
export function pythonPrefix(venv: string): string | null {
  if (prefixes.has(venv)) return prefixes.get(venv)!;
  const asked = run(path.join(venv, 'bin', 'python'), ['-c', 'import sys; print(sys.base_prefix)'], {
    what: `asking ${venv}'s Python for its prefix`,
  }).trim();
  const prefix = asked === '/usr' || asked.startsWith('/usr/') ? null : asked;
  prefixes.set(venv, prefix);
  return prefix;
}
