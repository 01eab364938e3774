/**
 * The `env` section of a run config: one schema per registered env kind.
 * Each env keeps its schema in its own folder (core/envs/<kind>/config.ts);
 * its registration (core/envs/registry.ts) holds the same schema object.
 * Workflow code bundles this module (it validates configs and config
 * changes), so nothing here reaches outside: no node built-ins, no env code.
 */
import { z } from 'zod';
import { SimEnvConfig } from './sim/config';
import { DbBenchEnvConfig } from './dbbench/config';
import { CharsetEnvConfig } from './charset/config';
import { SweEnvConfig } from './swe/config';
import { AppWorldEnvConfig } from './appworld/config';
import { ModuleEnvConfig, isModulePath, MODULE_KIND } from './module/config';
import { OpenEnvEnvConfig } from './openenv/config';

export const EnvConfig = z.discriminatedUnion('kind', [
  SimEnvConfig,
  DbBenchEnvConfig,
  CharsetEnvConfig,
  SweEnvConfig,
  AppWorldEnvConfig,
  OpenEnvEnvConfig,
  ModuleEnvConfig,
]);
export type EnvConfig = z.infer<typeof EnvConfig>;

/** Every env kind a config may name. */
export const ENV_KINDS: readonly string[] = EnvConfig.options.map((schema) => schema.shape.kind.value);

/** Fields of an env config that name files the worker reads: each `data`, `tasks`, `world`, `root` a config sets, and a module given by path. */
const FILE_FIELDS = ['world', 'data', 'tasks', 'root'] as const;

export function envFilesNamed(env: EnvConfig): Array<{ path: string; file: string }> {
  const fields = env as Record<string, unknown>;
  const named = FILE_FIELDS.flatMap((field) =>
    typeof fields[field] === 'string' ? [{ path: `env.${field}`, file: fields[field] as string }] : [],
  );
  if (env.kind === MODULE_KIND && isModulePath(env.module)) named.push({ path: 'env.module', file: env.module });
  return named;
}
