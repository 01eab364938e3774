/**
 * `harness-s mlflow setup`: MLflow's tracking server (`mlflow` from PyPI) in a
 * Python 3.11 venv, in a cache outside the clone, keyed by version.
 * $HARNESS_S_MLFLOW_HOME, default ~/.cache/harness-s/mlflow:
 *
 *   mlflow-<version>-py3.11/   the venv (pip install mlflow==<version> psycopg[binary])
 *   logs/                      install logs
 *
 * Idempotent: a complete venv is reused; one without its marker (an
 * interrupted install) is made again. One setup at a time per cache (a lock).
 * psycopg (3) is the PostgreSQL driver SQLAlchemy 2.1, under mlflow, loads for
 * a `postgresql://` backend store URI.
 */
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { installCachedVenv } from '../cached-venv';

export const MLFLOW_VERSION = '3.17.2';
export const MLFLOW_PYTHON = '3.11';
const PACKAGES = [`mlflow==${MLFLOW_VERSION}`, 'psycopg==3.3.9', 'psycopg-binary==3.3.9'];
/** Written last into a complete venv. */
const COMPLETE_MARKER = '.harness-s-complete';

export class MlflowSetupError extends Error {
  override name = 'MlflowSetupError';
}

export interface MlflowInstall {
  venv: string;
  /** The venv's `mlflow` command. */
  mlflow: string;
}

export function mlflowHome(): string {
  return path.resolve(process.env.HARNESS_S_MLFLOW_HOME || path.join(os.homedir(), '.cache', 'harness-s', 'mlflow'));
}

export const mlflowVenvDir = (home = mlflowHome()) => path.join(home, `mlflow-${MLFLOW_VERSION}-py${MLFLOW_PYTHON}`);

/** The installed venv, or null when `harness-s mlflow setup` has not completed here. */
export function mlflowInstall(home = mlflowHome()): MlflowInstall | null {
  const venv = mlflowVenvDir(home);
  if (!existsSync(path.join(venv, COMPLETE_MARKER))) return null;
  return { venv, mlflow: path.join(venv, 'bin', 'mlflow') };
}

export async function setupMlflow(log: (line: string) => void = () => undefined, home = mlflowHome()): Promise<MlflowInstall> {
  const dir = mlflowVenvDir(home);
  await installCachedVenv(
    {
      name: 'mlflow',
      version: MLFLOW_VERSION,
      python: MLFLOW_PYTHON,
      packages: PACKAGES,
      home,
      dir,
      marker: COMPLETE_MARKER,
      fail: (message) => new MlflowSetupError(message),
    },
    log,
  );
  const installed = mlflowInstall(home);
  if (!installed) throw new MlflowSetupError(`MLflow setup finished, but ${dir} has no ${COMPLETE_MARKER}`);
  return installed;
}
