/**
 * `harness-s openenv setup`: the `openenv` package from PyPI in a Python 3.11
 * venv, in the cache core/envs/openenv/install-location.ts names. Idempotent:
 * a complete venv is reused; one without its marker (an interrupted install)
 * is made again. One setup at a time per cache (a lock file).
 */
import { installCachedVenv } from '../cached-venv';
import {
  COMPLETE_MARKER,
  OPENENV_PYTHON,
  OPENENV_VERSION,
  openEnvHome,
  openEnvInstall,
  openEnvVenvDir,
} from '../../core/envs/openenv/install-location';

export class OpenEnvSetupError extends Error {
  override name = 'OpenEnvSetupError';
}

export async function setupOpenEnv(
  log: (line: string) => void = () => undefined,
  home = openEnvHome(),
): Promise<{ venv: string; python: string }> {
  const dir = openEnvVenvDir(home);
  await installCachedVenv(
    {
      name: 'openenv',
      version: OPENENV_VERSION,
      python: OPENENV_PYTHON,
      packages: [`openenv==${OPENENV_VERSION}`],
      home,
      dir,
      marker: COMPLETE_MARKER,
      fail: (message) => new OpenEnvSetupError(message),
    },
    log,
  );
  const installed = openEnvInstall(home);
  if (!installed) throw new OpenEnvSetupError(`OpenEnv setup finished, but ${dir} has no ${COMPLETE_MARKER}`);
  return installed;
}
