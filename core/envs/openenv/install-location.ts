/**
 * Where the `openenv` package (PyPI, BSD-3-Clause) is installed on this
 * machine: a Python 3.11 venv in a cache outside the clone, keyed by version,
 * made by `harness-s openenv setup` (infra/openenv/install.ts).
 * $HARNESS_S_OPENENV_HOME, default ~/.cache/harness-s/openenv:
 *
 *   openenv-<version>-py3.11/   the venv (pip install openenv==<version>)
 *   logs/                       install logs
 */
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const OPENENV_VERSION = '0.10.0';
export const OPENENV_PYTHON = '3.11';
/** Written last into a complete venv. */
export const COMPLETE_MARKER = '.harness-s-complete';
/** The shipped keypad env: its app's folder and name. */
export const KEYPAD_DIR = path.join(__dirname, 'keypad');
export const KEYPAD_APP = 'keypad_env:app';

export function openEnvHome(): string {
  return path.resolve(process.env.HARNESS_S_OPENENV_HOME || path.join(os.homedir(), '.cache', 'harness-s', 'openenv'));
}

export const openEnvVenvDir = (home = openEnvHome()) => path.join(home, `openenv-${OPENENV_VERSION}-py${OPENENV_PYTHON}`);

/** The installed venv, or null when `harness-s openenv setup` has not completed here. */
export function openEnvInstall(home = openEnvHome()): { venv: string; python: string } | null {
  const venv = openEnvVenvDir(home);
  if (!existsSync(path.join(venv, COMPLETE_MARKER))) return null;
  return { venv, python: path.join(venv, 'bin', 'python') };
}
