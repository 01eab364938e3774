/**
 * A Python venv with pinned packages, in a cache outside the clone, keyed by
 * version (OpenEnv's and MLflow's setups). Idempotent: a complete venv (its
 * marker written last) is reused; one without its marker (an interrupted
 * install) is made again. One setup at a time per cache (a lock file).
 */
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { acquireLock, findPython } from './engines/install';
import { runLogged } from './logged-command';

export interface CachedVenv {
  /** What is installed, for messages and the log file's name: `openenv`, `mlflow`. */
  name: string;
  version: string;
  /** The Python version the venv is made with. */
  python: string;
  packages: readonly string[];
  /** The cache folder (its logs/ and lock) and the venv's folder in it. */
  home: string;
  dir: string;
  /** The file written last into a complete venv. */
  marker: string;
  /** The setup's own error, with a message a user acts on. */
  fail: (message: string) => Error;
}

export async function installCachedVenv(venv: CachedVenv, log: (line: string) => void): Promise<void> {
  const { name, version, dir } = venv;
  await fs.mkdir(path.join(venv.home, 'logs'), { recursive: true });
  const lock = path.join(venv.home, '.setup.lock');
  await acquireLock(lock, log, `${name} setup`);
  try {
    if (existsSync(path.join(dir, venv.marker))) {
      log(`${name} ${version}: already installed in ${dir}`);
      return;
    }
    await fs.rm(dir, { recursive: true, force: true });
    const python = await findPython(venv.python).catch((err: Error) => {
      throw venv.fail(`${name} needs Python ${venv.python}: ${err.message}`);
    });
    const logFile = path.join(venv.home, 'logs', `${name}-${version}.install.log`);
    const started = Date.now();
    log(`${name} ${version}: creating a Python ${venv.python} venv in ${dir} and pip install ${venv.packages.join(' ')} (log: ${logFile})`);
    const options = { logFile, error: venv.fail };
    await runLogged(python, ['-m', 'venv', dir], options);
    await runLogged(path.join(dir, 'bin', 'python'), ['-m', 'pip', '--disable-pip-version-check', 'install', ...venv.packages], options);
    await fs.writeFile(
      path.join(dir, venv.marker),
      `${JSON.stringify({ [name]: version, python: venv.python, at: new Date().toISOString() })}\n`,
    );
    log(`${name} ${version}: installed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    await fs.rm(lock, { force: true });
  }
}
