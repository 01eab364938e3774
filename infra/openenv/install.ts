/**
 * `harness-s openenv setup`: the `openenv` package from PyPI in a Python 3.11
 * venv, in the cache core/envs/openenv/install-location.ts names. Idempotent:
 * a complete venv is reused; one without its marker (an interrupted install)
 * is made again. One setup at a time per cache (a lock file).
 */
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { acquireLock, findPython } from '../engines/install';
import { runLogged } from '../logged-command';
import { COMPLETE_MARKER, OPENENV_PYTHON, OPENENV_VERSION, openEnvHome, openEnvInstall, openEnvVenvDir } from '../../core/envs/openenv/install-location';

export class OpenEnvSetupError extends Error {
  override name = 'OpenEnvSetupError';
}

export async function setupOpenEnv(log: (line: string) => void = () => undefined, home = openEnvHome()): Promise<{ venv: string; python: string }> {
  const dir = openEnvVenvDir(home);
  await fs.mkdir(path.join(home, 'logs'), { recursive: true });
  const lock = path.join(home, '.setup.lock');
  await acquireLock(lock, log, 'OpenEnv setup');
  try {
    if (existsSync(path.join(dir, COMPLETE_MARKER))) {
      log(`openenv ${OPENENV_VERSION}: already installed in ${dir}`);
    } else {
      await fs.rm(dir, { recursive: true, force: true });
      const python = await findPython(OPENENV_PYTHON).catch((err: Error) => {
        throw new OpenEnvSetupError(`OpenEnv needs Python ${OPENENV_PYTHON}: ${err.message}`);
      });
      const logFile = path.join(home, 'logs', `openenv-${OPENENV_VERSION}.install.log`);
      const started = Date.now();
      log(`openenv ${OPENENV_VERSION}: creating a Python ${OPENENV_PYTHON} venv in ${dir} and pip install openenv==${OPENENV_VERSION} (log: ${logFile})`);
      const options = { logFile, error: (message: string) => new OpenEnvSetupError(message) };
      await runLogged(python, ['-m', 'venv', dir], options);
      await runLogged(path.join(dir, 'bin', 'python'), ['-m', 'pip', '--disable-pip-version-check', 'install', `openenv==${OPENENV_VERSION}`], options);
      await fs.writeFile(path.join(dir, COMPLETE_MARKER), `${JSON.stringify({ openenv: OPENENV_VERSION, python: OPENENV_PYTHON, at: new Date().toISOString() })}\n`);
      log(`openenv ${OPENENV_VERSION}: installed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
  } finally {
    await fs.rm(lock, { force: true });
  }
  const installed = openEnvInstall(home);
  if (!installed) throw new OpenEnvSetupError(`OpenEnv setup finished, but ${dir} has no ${COMPLETE_MARKER}`);
  return installed;
}
