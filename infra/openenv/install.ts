/**
 * `harness-s openenv setup`: the `openenv` package from PyPI in a Python 3.11
 * venv, in the cache core/envs/openenv/install-location.ts names. Idempotent:
 * a complete venv is reused; one without its marker (an interrupted install)
 * is made again. One setup at a time per cache (a lock file).
 */
import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { acquireLock, findPython } from '../engines/install';
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
      await logged(python, ['-m', 'venv', dir], logFile);
      await logged(path.join(dir, 'bin', 'python'), ['-m', 'pip', '--disable-pip-version-check', 'install', `openenv==${OPENENV_VERSION}`], logFile);
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

/** Runs a command with its output appended to `logFile`; fails with the command, its exit code and its last output lines. */
async function logged(command: string, args: string[], logFile: string): Promise<void> {
  const out = createWriteStream(logFile, { flags: 'a' });
  const shown = `${command} ${args.join(' ')}`;
  out.write(`\n$ ${shown}\n`);
  let tail = '';
  const keep = (chunk: Buffer) => {
    out.write(chunk);
    tail = (tail + chunk.toString('utf8')).slice(-16_000);
  };
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', (err) => reject(new OpenEnvSetupError(`\`${shown}\` could not start: ${err.message}`)));
    child.on('close', resolve);
  }).finally(() => new Promise((resolve) => out.end(resolve)));
  if (code !== 0) throw new OpenEnvSetupError(`\`${shown}\` failed (exit ${code}); its last output (full log: ${logFile}):\n${tail.trimEnd().split('\n').slice(-25).join('\n')}`);
}
