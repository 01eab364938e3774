/**
 * `harness-s appworld setup`: installs the `appworld` package (Apache-2.0,
 * https://github.com/StonyBrookNLP/appworld) into a Python 3.11 venv and builds
 * the fixture world (an APPWORLD_ROOT) from core/envs/appworld/fixture/ with the
 * package's own code. The official task data is on S3, which this machine does
 * not reach; the fixture needs nothing but PyPI. Where everything goes is
 * core/envs/appworld/install-location.ts (the env reads it from there).
 *
 * A venv or fixture folder without its completion marker is an interrupted
 * install: it is removed and made again. One setup at a time per cache (a lock
 * file); the fixture is also built into a temporary folder and renamed into place.
 */
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { acquireLock, findPython } from '../engines/install';
import { runLogged } from '../logged-command';
import {
  APPWORLD_PYTHON,
  APPWORLD_VERSION,
  appworldHome,
  appWorldInstall,
  COMPLETE_MARKER,
  FIXTURE_BUILDER,
  FIXTURE_TASKS_FILE,
  fixtureDir,
  installAt,
  loadFixtureTasks,
  venvDir,
  type AppWorldInstall,
} from '../../core/envs/appworld/install-location';

export * from '../../core/envs/appworld/install-location';

export class AppWorldSetupError extends Error {
  override name = 'AppWorldSetupError';
  constructor(
    message: string,
    readonly command?: string,
    readonly exitCode?: number | null,
    readonly outputTail?: string,
  ) {
    super(message);
  }
}

/**
 * `harness-s appworld setup`: the venv (reused when complete), then the fixture
 * world (reused when built). Idempotent; `log` gets one line per step.
 */
export async function setupAppWorld(log: (line: string) => void = () => undefined, home = appworldHome()): Promise<AppWorldInstall> {
  await fs.mkdir(path.join(home, 'logs'), { recursive: true });
  const lock = path.join(home, '.setup.lock');
  await acquireLock(lock, log, 'AppWorld setup');
  try {
    await installVenv(home, log);
    await buildFixture(home, log);
  } finally {
    await fs.rm(lock, { force: true });
  }
  const installed = appWorldInstall(home);
  if (!installed)
    throw new AppWorldSetupError(`AppWorld setup finished, but ${venvDir(home)} or ${fixtureDir(home)} has no ${COMPLETE_MARKER}`);
  return installed;
}

async function installVenv(home: string, log: (line: string) => void): Promise<void> {
  const dir = venvDir(home);
  if (existsSync(path.join(dir, COMPLETE_MARKER))) {
    log(`appworld ${APPWORLD_VERSION}: already installed in ${dir}`);
    return;
  }
  await fs.rm(dir, { recursive: true, force: true }); // an interrupted install
  let python: string;
  try {
    python = await findPython(APPWORLD_PYTHON);
  } catch (err) {
    throw new AppWorldSetupError(`AppWorld needs Python ${APPWORLD_PYTHON}: ${(err as Error).message}`);
  }
  const { python: venvPython, appworld, cache } = installAt(home);
  const logFile = path.join(home, 'logs', `appworld-${APPWORLD_VERSION}.install.log`);
  let started = Date.now();
  log(`appworld ${APPWORLD_VERSION}: creating a Python ${APPWORLD_PYTHON} venv in ${dir} (log: ${logFile})`);
  await runLogged(python, ['-m', 'venv', dir], { logFile, error: setupError });
  log(`appworld ${APPWORLD_VERSION}: pip install appworld==${APPWORLD_VERSION}`);
  await runLogged(venvPython, ['-m', 'pip', '--disable-pip-version-check', 'install', `appworld==${APPWORLD_VERSION}`], {
    logFile,
    error: setupError,
  });
  log(`appworld ${APPWORLD_VERSION}: venv and pip took ${seconds(started)}`);
  started = Date.now();
  log(`appworld ${APPWORLD_VERSION}: appworld install (unpacks the apps; APPWORLD_CACHE=${cache})`);
  await fs.mkdir(cache, { recursive: true });
  await runLogged(appworld, ['install'], { logFile, env: { ...process.env, APPWORLD_CACHE: cache }, error: setupError });
  await fs.writeFile(
    path.join(dir, COMPLETE_MARKER),
    `${JSON.stringify({ appworld: APPWORLD_VERSION, python: APPWORLD_PYTHON, at: new Date().toISOString() })}\n`,
  );
  log(`appworld ${APPWORLD_VERSION}: appworld install took ${seconds(started)}; installed`);
}

async function buildFixture(home: string, log: (line: string) => void): Promise<void> {
  const dir = fixtureDir(home);
  if (existsSync(path.join(dir, COMPLETE_MARKER))) {
    log(`fixture world: already built in ${dir}`);
    return;
  }
  await fs.rm(dir, { recursive: true, force: true });
  const logFile = path.join(home, 'logs', `${path.basename(dir)}.build.log`);
  const started = Date.now();
  log(`fixture world: building ${loadFixtureTasks().length} tasks into ${dir} (log: ${logFile})`);
  const { python, cache } = installAt(home);
  const env: NodeJS.ProcessEnv = { ...process.env, APPWORLD_CACHE: cache };
  delete env.APPWORLD_ROOT; // the builder sets it to the folder it builds in
  await runLogged(python, [FIXTURE_BUILDER, '--root', dir, '--tasks', FIXTURE_TASKS_FILE], { logFile, env, cwd: home, error: setupError });
  log(`fixture world: built and checked in ${seconds(started)} (every solution passes, every no-op fails)`);
}

const setupError = (message: string) => new AppWorldSetupError(message);

const seconds = (since: number) => `${((Date.now() - since) / 1000).toFixed(1)} s`;
