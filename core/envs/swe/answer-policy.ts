/**
 * What of an agent's diff is scored: SWE-bench's rule, enforced. The answer
 * may change the package's existing source files and add files under its
 * source folders; changes elsewhere are left out (a stray reproduce script,
 * an edited README, tests and pytest configuration), and an answer that
 * plants something that runs before or around the tests (start-up hooks,
 * a module shadowing the test runner, packaging metadata with entry points,
 * compiled code, symlinks) or whose added code reaches into the test
 * machinery is refused whole. Under RL the policy is an adversary: whatever
 * scoring honours, it learns to use.
 *
 * Two checks read the added code: a scan of every kept file's added lines as
 * text (here), and, for Python files, a check of the syntax tree after the
 * patch (answer_ast.py, run by scoring in the sandbox once git has applied
 * the patch): the patch may change its own package's objects only, and may
 * not reach objects through names it computes.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { isTestPath } from './trees';

/** Where an instance's package lives in its tree: folders (with their __init__.py) and single-file modules. */
export interface PackageScope {
  /** Repository-relative folders, e.g. `markdown`, `src/attr`. */
  packageDirs: string[];
  /** Repository-relative single-file modules, e.g. `xmltodict.py`. */
  modules: string[];
}

/** The package's scope from the base tree's file list and the instance's pythonpath folders. */
export function packageScopeOf(files: readonly string[], pythonpath: readonly string[]): PackageScope {
  const packageDirs = new Set<string>();
  const modules = new Set<string>();
  for (const entry of pythonpath) {
    const root = entry === '.' || entry === '' ? '' : `${entry.replace(/\/+$/, '')}/`;
    for (const file of files) {
      if (!file.startsWith(root)) continue;
      const rest = file.slice(root.length).split('/');
      if (rest.length === 2 && rest[1] === '__init__.py' && !isTestPath(`${rest[0]}/x`)) packageDirs.add(`${root}${rest[0]}`);
      if (rest.length === 1 && /^[A-Za-z_]\w*\.py$/.test(rest[0]) && !['setup.py', 'conftest.py'].includes(rest[0]) && !isTestPath(rest[0]))
        modules.add(file);
    }
  }
  return { packageDirs: [...packageDirs].sort(), modules: [...modules].sort() };
}

/** pytest's configuration files: the tests' settings are the maintainers', not the agent's. */
export const PYTEST_CONFIG_FILES = ['pytest.toml', '.pytest.toml', 'pytest.ini', '.pytest.ini', 'pyproject.toml', 'tox.ini', 'setup.cfg'];

/** Tests and what configures pytest: their changes are left out (as before this policy, and named). */
export function isProtectedPath(file: string): boolean {
  const base = file.split('/').pop()!;
  return isTestPath(file) || PYTEST_CONFIG_FILES.includes(base) || file.split('/').includes('.pytest_cache');
}

/**
 * Why a file may not be in an answer at all, or null. These run before or
 * beside the tests wherever they sit on the path, so the answer that plants
 * one is refused rather than trimmed.
 */
export function plantedHookReason(file: string): string | null {
  const parts = file.split('/');
  const base = parts[parts.length - 1];
  if (base === 'sitecustomize.py' || base === 'usercustomize.py') return `${file}: a Python start-up hook`;
  if (base.endsWith('.pth')) return `${file}: a .pth file (run at start-up from a site folder)`;
  if (parts.some((p) => /\.(dist-info|egg-info|egg-link)$/.test(p) || p === 'entry_points.txt'))
    return `${file}: packaging metadata (its entry points load plugins into pytest)`;
  if (parts.includes('__pycache__') || /\.(pyc|pyo|so|pyd|dylib)$/.test(base))
    return `${file}: compiled code (it would run instead of the source)`;
  if (
    /^(pytest|py|pluggy|_pytest|_hypothesis_pytestplugin|pytest_\w+)(\.py)?$/.test(base) ||
    parts.slice(0, -1).some((p) => /^(_pytest|pluggy|pytest)$/.test(p))
  ) {
    return `${file}: shadows the test runner or its plugins`;
  }
  if (base === 'conftest.py' && !isTestPath(parts.slice(0, -1).concat('x').join('/')))
    return `${file}: a conftest.py outside the test folders (pytest loads it as a plugin)`;
  return null;
}

/** One file's part of a `git diff`. */
interface FilePatch {
  text: string;
  /** The paths it touches (old and new; one when they are the same), without /dev/null. */
  paths: string[];
  /** The file's path after the change (null when it is deleted). */
  target: string | null;
  added: string[];
  /** The line numbers, in the file after the change, of the added lines. */
  addedAt: number[];
}

export interface AnswerDecision {
  /** The patch to score: the kept parts. */
  patch: string;
  /** Files left out, each with why. */
  dropped: Array<{ file: string; why: 'protected' | 'outside' }>;
  /** Why the whole answer is refused, or null. */
  refused: string | null;
  /** Every path the kept patch may create, change or delete: what git writes must be within it (scoring checks). */
  files: string[];
}

const refusal = (why: string): AnswerDecision => ({ patch: '', dropped: [], refused: why, files: [] });

function parseFilePatch(text: string): FilePatch | { error: string } {
  const all = text.split('\n');
  const firstHunk = all.findIndex((l) => l.startsWith('@@'));
  // The file's header lines; hunk lines may start with anything (a removed `-- x` reads as `--- x`).
  const lines = firstHunk === -1 ? all : all.slice(0, firstHunk);
  const header = lines[0].slice('diff --git '.length);
  if (/["\\\t]/.test(header) || header.split(' ').length !== 2)
    return { error: `a path with spaces, quotes or backslashes (${header.slice(0, 200)})` };
  const field = (name: string) => lines.find((l) => l.startsWith(`${name} `))?.slice(name.length + 1);
  for (const line of lines) {
    if (/^(new file mode|deleted file mode|old mode|new mode) (120000|160000)$/.test(line) || /^index \S+ (120000|160000)$/.test(line)) {
      return { error: `${header.split(' ')[0].slice(2)}: a symlink or submodule` };
    }
  }
  if (lines.some((l) => l === 'GIT binary patch' || /^Binary files .* differ$/.test(l)))
    return { error: `${header.split(' ')[0].slice(2)}: a binary change` };
  // `git apply` strips the first component of every name, whatever it is: a name without a/ or b/ would be written elsewhere than it reads.
  if (!/^a\/\S+ b\/\S+$/.test(header)) return { error: `a diff header whose paths do not start with a/ and b/ (${header.slice(0, 200)})` };
  for (const [name, prefix] of [
    ['---', 'a/'],
    ['+++', 'b/'],
  ] as const) {
    const value = field(name);
    if (value !== undefined && value !== '/dev/null' && !value.startsWith(prefix))
      return { error: `a \`${name}\` line whose path does not start with ${prefix} (${value.slice(0, 200)})` };
  }
  const strip = (p: string | undefined, prefix: string) =>
    p === undefined || p === '/dev/null' ? null : p.startsWith(prefix) ? p.slice(prefix.length) : p;
  let from = strip(field('rename from') ?? field('copy from'), '') ?? strip(field('---'), 'a/');
  let to = strip(field('rename to') ?? field('copy to'), '') ?? strip(field('+++'), 'b/');
  if (from === null && to === null) {
    // A mode change or an empty file: the header names the one path twice (`a/P b/P`).
    const half = (header.length - 5) / 2;
    const path = header.slice(2, 2 + half);
    if (!Number.isInteger(half) || header !== `a/${path} b/${path}`)
      return { error: `a diff header that cannot be read (${header.slice(0, 200)})` };
    if (lines.some((l) => l.startsWith('deleted file mode'))) from = path;
    else if (lines.some((l) => l.startsWith('new file mode'))) to = path;
    else from = to = path;
  }
  const added: string[] = [];
  const addedAt: number[] = [];
  let line = 0;
  for (const l of firstHunk === -1 ? [] : all.slice(firstHunk)) {
    const hunk = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(l);
    if (hunk) line = Number(hunk[1]);
    else if (l.startsWith('+')) {
      added.push(l.slice(1));
      addedAt.push(line++);
    } else if (l.startsWith(' ') || l === '') line++;
  }
  const paths = [...new Set([from, to].filter((p): p is string => p !== null))];
  return { text, paths, target: to, added, addedAt };
}

function inScope(file: string, scope: PackageScope): boolean {
  return scope.modules.includes(file) || scope.packageDirs.some((dir) => file.startsWith(`${dir}/`));
}

/** The answer as scoring takes it: kept, trimmed (named), or refused (why). */
export function applyAnswerPolicy(patch: string, scope: PackageScope): AnswerDecision {
  const parts = patch.split(/(?=^diff --git )/m).filter((p) => p.trim() !== '');
  const kept: FilePatch[] = [];
  const dropped: AnswerDecision['dropped'] = [];
  for (const part of parts) {
    if (!part.startsWith('diff --git ')) return refusal('text before the first file of the diff');
    const file = parseFilePatch(part);
    if ('error' in file) return refusal(file.error);
    for (const p of file.paths) {
      const hook = plantedHookReason(p);
      if (hook) return refusal(hook);
    }
    const protectedPath = file.paths.find(isProtectedPath);
    const outside = file.paths.find((p) => !inScope(p, scope));
    if (protectedPath) dropped.push({ file: protectedPath, why: 'protected' });
    else if (outside) dropped.push({ file: outside, why: 'outside' });
    else kept.push(file);
  }
  // Every kept file, not only .py: a data file can be loaded as code.
  for (const file of kept) {
    if (file.target === null) continue;
    const reach = reachIntoTestMachinery(file.added);
    if (reach) return refusal(`${file.target}: ${reach}`);
  }
  return { patch: kept.map((f) => f.text).join(''), dropped, refused: null, files: [...new Set(kept.flatMap((f) => f.paths))].sort() };
}

/**
 * What added code may not touch, with the name of what it reaches. The
 * package runs inside pytest's process, so anything that can reach pytest's
 * objects (its modules, the import system, frames, the collector of every
 * object, raw memory), run code built from strings, end the process or
 * replace its output can rewrite the verdict. A scan of text cannot be
 * complete (Python is dynamic); the canaries in verdict.ts catch what slips by
 * and rewrites every outcome.
 */
const REACHES: ReadonlyArray<readonly [RegExp, string]> = [
  [
    /\b_?pytest(?![A-Za-z0-9])|\bpluggy\b|\bpy\.test\b|\bunittest\s*\.\s*(TestResult|TextTestResult|TestCase\s*\.\s*run)\b/,
    'the test runner',
  ],
  [
    /^\s*(from|import)\s+[\w.]*\b(tests?|testing|conftest)\b|^\s*from\s+\S+\s+import\s+.*\b(tests?|testing|conftest)\b/,
    'the tests themselves',
  ],
  [/\bsys\s*\.\s*modules\b|['"]modules['"]/, 'the module table (sys.modules)'],
  // importlib's spec and loader classes are named freely (a package may be its own importer, as toolz's tlz); loading by name or from a file is not.
  [
    /\b__import__\b|\bimportlib\b(?!\s*\.\s*(machinery|util)\b)|\b(import_module|exec_module|load_module|spec_from_file_location|spec_from_loader|module_from_spec|reload)\b|\bimp\s*\.|\bpkgutil\b|\brunpy\b|\bzipimport\b|\bmeta_path\b|\bpath_hooks\b|\bpath_importer_cache\b/,
    'the import system',
  ],
  [/\bbuiltins\b|\b__builtins__\b|\b__builtin__\b/, 'builtins'],
  [
    /\b_getframe\b|\bcurrentframe\b|\bf_back\b|\bf_globals\b|\bf_locals\b|\bf_code\b|\btb_frame\b|\b__traceback__\b|\bgi_frame\b|\bcr_frame\b|\bag_frame\b|\bwalk_stack\b|\bwalk_tb\b|\binspect\s*\.\s*(stack|trace|getouterframes|getinnerframes|getframeinfo)\b/,
    'stack frames',
  ],
  [/\bgc\b|\bctypes\b|\b_ctypes\b|\bcffi\b|\/proc\//, "objects or memory behind the program's back (gc, ctypes, /proc)"],
  [
    /\batexit\b|\b_exit\b|\bos\s*\.\s*(kill|killpg|abort|fork|forkpty|exec\w*|spawn\w*|system|popen|dup2?|close|closerange|write)\b|\bsubprocess\b|\bpty\b|\bsignal\s*\.\s*(signal|alarm|setitimer|raise_signal|pthread_kill)\b|\bfaulthandler\b/,
    'the process (its exit, signals, file descriptors, other processes)',
  ],
  [
    /\bsettrace\b|\bsetprofile\b|\bexcepthook\b|\bunraisablehook\b|\bdisplayhook\b|\baddaudithook\b|\bsys\s*\.\s*monitoring\b|\bsys\s*\.\s*(stdout|stderr|__stdout__|__stderr__)\s*=(?!=)/,
    "the interpreter's hooks or the test output",
  ],
  // Reading a function's __code__ is introspection; replacing it swaps a function's body.
  [
    /(?<![\w.])(exec|eval|compile)\s*\(|\b(CodeType|FunctionType)\s*\(|\.__code__\s*=(?!=)|\bsetattr\s*\(.*__code__|\b__globals__\b|\b__closure__\b|\b__subclasses__\b/,
    'code built at run time',
  ],
  [/\bpickle\b|\bmarshal\b|\bshelve\b|\bdill\b|\bcloudpickle\b|\bcopyreg\b/, 'deserialised code (pickle, marshal)'],
];

/** The first added line that reaches into the test machinery, as a reason; null when none does. Comment lines are skipped. */
export function reachIntoTestMachinery(added: readonly string[]): string | null {
  for (const line of added) {
    // A source encoding such as utf-7 would hide any name from this scan.
    const coding = /^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)/.exec(line)?.[1].toLowerCase().replace(/_/g, '-');
    if (coding && !['utf-8', 'utf8', 'ascii', 'us-ascii', 'latin-1', 'iso-8859-1', 'latin1'].includes(coding))
      return `it declares the source encoding ${coding}, which hides what the code says`;
    if (/^\s*#/.test(line)) continue;
    for (const [pattern, what] of REACHES) {
      if (pattern.test(line)) return `its added code reaches into ${what}: \`${line.trim().slice(0, 160)}\``;
    }
  }
  return null;
}

/** The syntax-tree checker (answer_ast.py), staged in the sandbox beside the tree after the patch. */
export const ANSWER_AST_SOURCE = readFileSync(path.join(__dirname, 'answer_ast.py'), 'utf8');
export const ANSWER_AST_PATH = '/io/harness-s-answer-ast.py';
/** How long the checker may take: it parses each file once; a file it cannot finish is refused. */
export const ANSWER_AST_TIMEOUT_SECONDS = 60;

/**
 * What the syntax-tree checker is asked, as JSON, or null when the kept patch
 * adds no Python lines: each Python file the patch leaves (path relative to
 * the tree) with the line numbers of its added lines, and the package's own
 * top-level names (imports of them are the package's objects).
 */
export function answerAstRequest(keptPatch: string, scope: PackageScope): string | null {
  const files: Array<{ path: string; added: number[] }> = [];
  for (const part of keptPatch.split(/(?=^diff --git )/m).filter((p) => p.startsWith('diff --git '))) {
    const file = parseFilePatch(part);
    if ('error' in file) throw new Error(`the kept patch cannot be read again: ${file.error}`);
    if (file.target?.endsWith('.py') && file.addedAt.length) files.push({ path: file.target, added: file.addedAt });
  }
  if (!files.length) return null;
  const names = [
    ...scope.packageDirs.map((d) => d.split('/').pop()!),
    ...scope.modules.map((m) => m.split('/').pop()!.replace(/\.py$/, '')),
  ];
  return JSON.stringify({ package_names: [...new Set(names)].sort(), files });
}

/** The checker's command in the sandbox (the tests' interpreter, isolated: no site, no path from the environment or the current folder). */
export function answerAstCommand(requestFile: string): string {
  return `python -I -S ${ANSWER_AST_PATH} ${requestFile}`;
}

/** Why the checker refuses the answer, or null; a checker that did not finish or answer refuses it too (saying so). */
export function answerAstVerdict(result: { exitCode: number | null; output: string; timedOut: boolean }): string | null {
  if (result.timedOut) return `its Python could not be checked within ${ANSWER_AST_TIMEOUT_SECONDS} s`;
  const line = result.output
    .split('\n')
    .reverse()
    .find((l) => l.startsWith('HARNESS-S-AST '));
  if (result.exitCode !== 0 || !line)
    return `its Python could not be checked (the checker exited ${result.exitCode}: ${result.output.trim().slice(-300)})`;
  const verdict = JSON.parse(line.slice('HARNESS-S-AST '.length)) as { refused: string | null };
  return verdict.refused;
}
