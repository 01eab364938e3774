/**
 * A user's env from a module of its own (`env.kind: "module"`): the module
 * is loaded by the worker (never by workflow code), checked, and turned into
 * a registration like a shipped env's. docs/writing-an-env.md says what the
 * module exports; examples/module-env/ is a complete one.
 */
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import type { FailureDirections } from '../../evolution/failure-directions';
import type { Harness } from '../../harness/harness';
import { UserError } from '../../errors';
import type { Environment } from '../../harness/environment';
import type { AnyEnvRegistration, EnvRegistration } from '../registration';
import { isModulePath, MODULE_KIND, ModuleEnvConfig } from './config';

/** What an env module exports (as `default`, as `env`, or as the module itself). */
export interface ModuleEnv {
  /** The env's id: the `env` of its harness specs, its frozen pools, its runs. Lower-case letters, digits, - and _. */
  name: string;
  /** Its harness pool: a folder of HarnessSpec files (base first), absolute or relative to the module's own folder. */
  harnessDir: string;
  /** The system prompt its spec harnesses run on; none when absent. */
  systemPrompt?: string;
  /** Checks `env.options`: a zod schema (anything with `safeParse`); the options as given when absent. */
  options?: { safeParse(value: unknown): { success: true; data: unknown } | { success: false; error: { message: string } } };
  /** Failure type -> repair directions, where this env's failures differ from the default mapping. */
  failureDirections?: Partial<FailureDirections>;
  /** Builds the env: `options` checked, `harnesses` its pool (or the config's harnessDir or frozen pool), base first. */
  create(options: Record<string, unknown>, harnesses: Harness[]): Environment;
}

export class ModuleEnvError extends UserError {
  override name = 'ModuleEnvError';
}

const loaded = new Map<string, AnyEnvRegistration>();

export const moduleRegistration: EnvRegistration<ModuleEnvConfig> = {
  kind: MODULE_KIND,
  config: ModuleEnvConfig,
  systemPrompt: '',
  resolve: (config) => registrationOfModule(config.module),
  create() {
    throw new Error('a module env is built by the registration its module gives (registrationFor resolves it)');
  },
};

/** The registration a module env's module gives, loaded and checked once per worker. */
export function registrationOfModule(module: string): AnyEnvRegistration {
  const file = resolveModule(module);
  let registration = loaded.get(file);
  if (!registration) {
    registration = toRegistration(module, file, checkModuleEnv(module, file, loadModule(module, file)));
    loaded.set(file, registration);
  }
  return registration;
}

function resolveModule(module: string): string {
  const request = isModulePath(module) ? path.resolve(module) : module;
  try {
    return require.resolve(request, { paths: [process.cwd()] });
  } catch (err) {
    throw new ModuleEnvError(
      `env.module '${module}': cannot find it (${isModulePath(module) ? `looked for ${request}, from the worker's working directory ${process.cwd()}` : 'not a package the workers can require'}): ${(err as Error).message.split('\n')[0]}`,
    );
  }
}

function loadModule(module: string, file: string): unknown {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(file);
  } catch (err) {
    throw new ModuleEnvError(`env.module '${module}' (${file}): loading it failed: ${(err as Error).message}`);
  }
}

const SHAPE =
  'an env module exports { name, harnessDir, create(options, harnesses), systemPrompt?, options?, failureDirections? } (docs/writing-an-env.md)';

/** The module's env, or an error naming each thing it lacks. */
function checkModuleEnv(module: string, file: string, exports: unknown): ModuleEnv & { harnessDir: string } {
  const isObject = (c: unknown): c is Record<string, unknown> => (typeof c === 'object' || typeof c === 'function') && c !== null;
  const of = exports as { default?: unknown; env?: unknown } | undefined;
  const found = [of?.default, of?.env, exports].find((c) => isObject(c) && ('create' in c || 'name' in c)) ?? exports;
  const problems: string[] = [];
  if (!isObject(found)) throw new ModuleEnvError(`env.module '${module}' (${file}) exports no object: ${SHAPE}`);
  if (typeof found.name !== 'string' || !/^[a-z][a-z0-9_-]*$/.test(found.name))
    problems.push('`name`: a string of lower-case letters, digits, - and _ (the env id its harness specs name)');
  if (typeof found.create !== 'function') problems.push('`create`: a function (options, harnesses) returning the Environment');
  let harnessDir = '';
  if (typeof found.harnessDir !== 'string') problems.push('`harnessDir`: the folder of its harness spec files');
  else {
    harnessDir = path.resolve(path.dirname(file), found.harnessDir);
    if (!existsSync(harnessDir) || !statSync(harnessDir).isDirectory()) problems.push(`\`harnessDir\`: ${harnessDir} is not a folder`);
  }
  if (found.systemPrompt !== undefined && typeof found.systemPrompt !== 'string') problems.push('`systemPrompt`: a string when given');
  if (found.options !== undefined && typeof (found.options as { safeParse?: unknown }).safeParse !== 'function')
    problems.push('`options`: a schema with safeParse (zod) when given');
  if (problems.length > 0)
    throw new ModuleEnvError(
      `env.module '${module}' (${file}) is not an env module:\n${problems.map((p) => `  - ${p}`).join('\n')}\n${SHAPE}`,
    );
  return { ...(found as unknown as ModuleEnv), harnessDir };
}

function toRegistration(module: string, file: string, env: ModuleEnv & { harnessDir: string }): AnyEnvRegistration {
  const registration: EnvRegistration<ModuleEnvConfig> = {
    kind: MODULE_KIND,
    config: ModuleEnvConfig,
    envId: () => env.name,
    poolDir: env.harnessDir,
    systemPrompt: env.systemPrompt ?? '',
    failureDirections: env.failureDirections,
    create(config, pool) {
      let options: Record<string, unknown> = config.options;
      if (env.options) {
        const checked = env.options.safeParse(config.options);
        if (!checked.success)
          throw new ModuleEnvError(`env.options for env module '${module}' (${env.name}) are invalid: ${checked.error.message}`);
        options = checked.data as Record<string, unknown>;
      }
      const built = env.create(options, pool.harnesses());
      const missing = ['listTasks', 'describeTask', 'harnesses', 'startEpisode'].filter(
        (m) => typeof (built as unknown as Record<string, unknown>)?.[m] !== 'function',
      );
      if (missing.length > 0)
        throw new ModuleEnvError(
          `env module '${module}' (${file}): create() returned no Environment: it lacks ${missing.join(', ')} (core/harness/environment.ts)`,
        );
      if (built.id !== env.name)
        throw new ModuleEnvError(`env module '${module}' (${file}): its Environment's id is '${built.id}', not its name '${env.name}'`);
      return built;
    },
  };
  return registration;
}
