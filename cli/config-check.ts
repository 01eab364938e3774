/**
 * `harness-s config check <file>`: a run config or an evolution config file,
 * checked as a run or an evolution would read it, without any service. It
 * says what is wrong (every bad field by its path, every file it names that
 * is not there), what the config will use (the resolved endpoints) and what
 * is likely not meant (warnings: mixed worlds, a simulator's learning rate).
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { filesNamedBy, parseRunConfig, RunConfig, RunConfigError } from '../core/config';
import { runConfigEndpoints, runConfigWarnings, type ConfigEndpoint, type ConfigWarning } from '../core/config-check';
import { EvolutionConfig, EvolutionConfigError, parseEvolutionConfig } from '../core/evolution/config';
import { evolutionConfigEndpoints, evolutionConfigWarnings } from '../core/evolution/config-check';
import { envEndpoints } from '../core/envs/endpoints';
import { runInputProblem, withoutSchemaKey } from '../core/run-input';
import { isSimulatedEnv } from '../core/sim-kind';
import { objectKeysAt, type ConfigIssue } from '../core/zod-errors';

export const CONFIG_KINDS = ['run', 'evolution'] as const;
export type ConfigKind = (typeof CONFIG_KINDS)[number];

/** What `config check` found; `--json` prints it as is. */
export interface ConfigCheckResult {
  file: string;
  /** Which config the file holds (as told by its fields, or as asked); null when the file could not be read. */
  kind: ConfigKind | null;
  valid: boolean;
  /** The config in a few words, when it is valid. */
  summary: string | null;
  errors: ConfigIssue[];
  warnings: ConfigWarning[];
  endpoints: ConfigEndpoint[];
}

export interface ConfigCheckOptions {
  /** Check it as this kind of config; told from its fields when absent. */
  kind?: ConfigKind;
  /** Where relative paths (the file, the files it names) are resolved from: the current directory when absent. */
  cwd?: string;
}

/** The file's path in a message. */
const FILE = '(file)';
/** How the files a config names are found: the workers read them, from their working directory. */
const WORKERS_READ = 'paths are read by the workers, from their working directory';

export function checkConfigFile(file: string, options: ConfigCheckOptions = {}): ConfigCheckResult {
  const cwd = options.cwd ?? process.cwd();
  const result: ConfigCheckResult = { file, kind: null, valid: false, summary: null, errors: [], warnings: [], endpoints: [] };
  const invalid = (errors: ConfigIssue[]) => ({ ...result, errors });
  const full = path.resolve(cwd, file);
  if (!existsSync(full)) return invalid([{ path: FILE, message: `file not found: ${file}` }]);
  let json: unknown;
  try {
    json = withoutSchemaKey(JSON.parse(readFileSync(full, 'utf8')));
  } catch (err) {
    return invalid([{ path: FILE, message: `cannot read it as JSON: ${(err as Error).message}` }]);
  }
  const kind = options.kind ?? kindOf(unwrapped(json));
  result.kind = kind;
  return kind === 'run' ? checkRunConfig(json, result, cwd) : checkEvolutionConfig(json, result, cwd);
}

/** The config of a `{"config": ...}` file, or the file itself. */
function unwrapped(json: unknown): unknown {
  return isObject(json) && 'config' in json ? json.config : json;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A run config unless more of its keys are an evolution config's only than a run config's only. */
function kindOf(config: unknown): ConfigKind {
  if (!isObject(config)) return 'run';
  const runKeys = objectKeysAt(RunConfig, []);
  const evolutionKeys = objectKeysAt(EvolutionConfig, []);
  const keys = Object.keys(config);
  const runOnly = keys.filter((k) => runKeys.includes(k) && !evolutionKeys.includes(k)).length;
  const evolutionOnly = keys.filter((k) => evolutionKeys.includes(k) && !runKeys.includes(k)).length;
  return evolutionOnly > runOnly ? 'evolution' : 'run';
}

function checkRunConfig(json: unknown, result: ConfigCheckResult, cwd: string): ConfigCheckResult {
  // As `run start` reads it (cli/runs.ts readConfigFile): a workflow input {"config": ...}, or a bare config.
  const isInput = isObject(json) && 'config' in json;
  const inputProblem = isInput ? runInputProblem(json) : null;
  if (inputProblem) return { ...result, errors: [{ path: '(root)', message: inputProblem }] };
  const raw = isInput ? (json as { config: unknown }).config : json;
  let config: RunConfig;
  try {
    config = parseRunConfig(raw, result.file);
  } catch (err) {
    return { ...result, errors: issuesOf(err, RunConfigError) };
  }
  const missing = missingFiles(filesNamedBy(config), cwd);
  if (missing.length) return { ...result, errors: missing };
  const { env, steps, rollout } = config;
  return {
    ...result,
    valid: true,
    summary: `${env.kind}, ${steps} steps, B=${rollout.tasksPerStep}, G=${rollout.groupSize}${isSimulatedEnv(env.kind) ? '; SIMULATED' : ''}`,
    warnings: runConfigWarnings(config, raw),
    endpoints: [...runConfigEndpoints(config), ...envEndpoints(config.env)],
  };
}

function checkEvolutionConfig(json: unknown, result: ConfigCheckResult, cwd: string): ConfigCheckResult {
  // As `pool evolve` reads it (cli/pools.ts readEvolutionConfigFile): {"config": ...} alone, or a bare config.
  const raw = isObject(json) && 'config' in json && Object.keys(json).length === 1 ? json.config : json;
  let config: EvolutionConfig;
  try {
    config = parseEvolutionConfig(raw, result.file);
  } catch (err) {
    return { ...result, errors: issuesOf(err, EvolutionConfigError) };
  }
  const named = [...filesNamedBy({ env: config.env }), ...(config.base === undefined ? [] : [{ path: 'base', file: config.base }])];
  const missing = missingFiles(named, cwd);
  if (missing.length) return { ...result, errors: missing };
  return {
    ...result,
    valid: true,
    summary: `${config.env.kind}, ${config.rounds} rounds, ${config.directions.length} directions, G=${config.rolloutsPerTask}${isSimulatedEnv(config.env.kind) ? '; SIMULATED' : ''}`,
    warnings: evolutionConfigWarnings(config),
    endpoints: [...evolutionConfigEndpoints(config), ...envEndpoints(config.env)],
  };
}

function issuesOf(err: unknown, kind: typeof RunConfigError | typeof EvolutionConfigError): ConfigIssue[] {
  if (err instanceof kind && err.issues.length > 0) return err.issues;
  if (err instanceof Error) return [{ path: '(root)', message: err.message }];
  throw err;
}

function missingFiles(named: Array<{ path: string; file: string }>, cwd: string): ConfigIssue[] {
  return named
    .filter(({ file }) => !existsSync(path.resolve(cwd, file)))
    .map(({ path: at, file }) => ({ path: at, message: `file not found: ${file} (${WORKERS_READ})` }));
}

/** What `config check` prints without --json: errors (to stderr, by the caller) or the summary, the endpoints and the warnings. */
export function configCheckText(result: ConfigCheckResult): { out: string; err: string } {
  if (!result.valid) {
    const fileOnly = result.errors.length === 1 && result.errors[0].path === FILE;
    const err = fileOnly
      ? `${result.errors[0].message.startsWith('file not found') ? '' : `${result.file}: `}${result.errors[0].message}`
      : `${result.file} is invalid${result.kind ? ` (as ${result.kind === 'run' ? 'a run' : 'an evolution'} config)` : ''}:\n${result.errors
          .map((e) => `  - ${e.path}: ${e.message}`)
          .join('\n')}`;
    return { out: '', err };
  }
  const lines = [`${result.file}: valid ${result.kind === 'evolution' ? 'evolution config ' : ''}(${result.summary})`, 'endpoints:'];
  for (const e of result.endpoints) {
    const details = [
      e.simulated ? 'SIMULATED' : '',
      e.model ? `model ${e.model}` : '',
      e.apiKeyEnv ? `key from $${e.apiKeyEnv}` : '',
      e.note ?? '',
    ].filter(Boolean);
    lines.push(`  ${e.role.padEnd(9)} ${e.address}${details.length ? `  (${details.join('; ')})` : ''}`);
  }
  for (const w of result.warnings) lines.push(`warning: ${w.path}: ${w.message}`);
  return { out: lines.join('\n'), err: '' };
}
