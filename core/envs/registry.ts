/**
 * The envs a worker can build, by kind: the shipped envs' registrations and
 * a user's module env (core/envs/registration.ts says what a registration
 * holds). Everything that needs an env's own facts (how to build it, its
 * harness pool, its system prompt, its harness space, what its failures call
 * for) asks here; nothing else names an env kind.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { EnvConfig } from './env-configs';
import { ENV_KINDS } from './env-configs';
import type { Environment } from '../harness/environment';
import type { AnyEnvRegistration, EnvPool, EnvServices } from './registration';
import { simRegistration } from './sim/registration';
import { charsetRegistration } from './charset/registration';
import { dbBenchRegistration } from './dbbench/registration';
import { sweRegistration } from './swe/registration';
import { appWorldRegistration } from './appworld/registration';
import { openEnvRegistration } from './openenv/registration';
import { moduleRegistration } from './module/registration';
import { specHarness } from '../harness/spec-harness';
import { loadHarnessPool, loadHarnessSpec, specFiles, type LoadedSpec } from '../harness/spec';
import type { Harness } from '../harness/harness';
import {
  checkFrozenVersions,
  ensureFrozenPoolFolder,
  FrozenPoolError,
  poolsRoot,
  readFrozenPool,
  type FrozenPool,
  type StoredFrozenPools,
} from '../harness/frozen-pool';
import { declarativeSpace, HarnessSpaceError, type HarnessSpace } from '../evolution/harness-space';
import { failureDirectionsFor, type FailureDirections } from '../evolution/failure-directions';
import { processSettings, type Settings } from '../settings';

export { specFiles };

/** Every registered env, by kind. */
export const ENV_REGISTRATIONS: ReadonlyMap<string, AnyEnvRegistration> = new Map(
  [
    simRegistration,
    charsetRegistration,
    dbBenchRegistration,
    sweRegistration,
    appWorldRegistration,
    openEnvRegistration,
    moduleRegistration,
  ].map((r) => [r.kind, r]),
);

/** The registration of an env kind; a module env's is the module's own, loaded (once) by the worker. */
export function registrationFor(env: Pick<EnvConfig, 'kind'> & Partial<EnvConfig>): AnyEnvRegistration {
  const registration = ENV_REGISTRATIONS.get(env.kind);
  if (!registration)
    throw new Error(
      `env.kind '${env.kind}' has no registration (registered: ${[...ENV_REGISTRATIONS.keys()].join(', ')}; the config schema knows: ${ENV_KINDS.join(', ')})`,
    );
  return registration.resolve?.(env) ?? registration;
}

/** The env's id in pools, runs and reports: its kind, or a module env's own name. */
export function envIdOf(env: EnvConfig): string {
  const registration = registrationFor(env);
  return registration.envId?.(env) ?? registration.kind;
}

/**
 * Builds the env a config describes, with its harness pool; `settings`: the
 * process's, read once at its start; `services`: what a worker's envs share
 * (none for a process without a run store).
 */
export function createEnvironment(env: EnvConfig, settings: Settings = processSettings(), services: EnvServices = {}): Environment {
  const registration = registrationFor(env);
  return registration.create(env, envPool(registration, env), settings, services);
}

/** Where a config's harnesses come from: its frozen pool, its harnessDir, or the env's shipped folder, read when first asked for. */
function envPool(registration: AnyEnvRegistration, env: EnvConfig): EnvPool {
  const envId = registration.envId?.(env) ?? registration.kind;
  let frozen: FrozenPool | undefined;
  let specs: LoadedSpec[] | undefined;
  const pool: EnvPool = {
    frozen() {
      if (env.pool !== undefined) frozen ??= frozenPool(envId, env.pool);
      return frozen;
    },
    specs() {
      if (specs) return specs;
      const fromFrozen = pool.frozen();
      if (fromFrozen) specs = frozenSpecPool(fromFrozen);
      else {
        const dir = env.harnessDir ?? shippedPoolDir(registration, env);
        if (dir === undefined) throw new Error(`env ${envId} ships no harness spec folder; set env.harnessDir or env.pool`);
        specs = loadHarnessPool(specFiles(dir));
      }
      return specs;
    },
    harnesses: () => specHarnesses(registration, pool.specs()),
  };
  return pool;
}

function shippedPoolDir(registration: AnyEnvRegistration, env: EnvConfig): string | undefined {
  return typeof registration.poolDir === 'function' ? registration.poolDir(env) : registration.poolDir;
}

/**
 * Puts the frozen pool a config names (`env.pool`) in this host's pools
 * folder, from the run store when the folder lacks it. Building an env reads
 * the folder synchronously, so the async paths before it call this first.
 */
export async function fetchFrozenPool(env: Pick<EnvConfig, 'pool'>, stored: StoredFrozenPools): Promise<void> {
  if (env.pool === undefined) return;
  try {
    await ensureFrozenPoolFolder(poolsRoot(), env.pool, stored);
  } catch (err) {
    if (err instanceof FrozenPoolError) throw new FrozenPoolError(`env.pool: ${err.message}`);
    throw err;
  }
}

/** A frozen pool of `envId`, verified against its hash; where it was looked for when it is not there. */
function frozenPool(envId: string, hash: string): FrozenPool {
  const root = poolsRoot();
  const dir = path.join(root, hash);
  if (!existsSync(dir)) {
    throw new FrozenPoolError(
      `env.pool: no frozen pool ${hash} here: looked in ${dir} ($HARNESS_S_POOLS_DIR sets the folder frozen pools are kept in; now ${root})`,
    );
  }
  const frozen = readFrozenPool(dir, hash);
  if (frozen.manifest.env !== envId) {
    throw new FrozenPoolError(`env.pool: frozen pool ${hash} (${dir}) is a pool of env ${frozen.manifest.env}, not of ${envId}`);
  }
  return frozen;
}

/** A frozen pool of HarnessSpec files, loaded like any spec folder, base first. */
function frozenSpecPool(frozen: FrozenPool): LoadedSpec[] {
  const pool = loadHarnessPool(frozen.manifest.members.map((m) => path.join(frozen.dir, m.file)));
  checkFrozenVersions(
    frozen,
    pool.map((loaded) => ({ id: loaded.spec.id, version: loaded.version })),
  );
  return pool;
}

/** One harness for `harness-s eval`: a spec file (on the env's system prompt), or the id of a harness in the env's pool. */
export function resolveHarness(envConfig: EnvConfig, env: Environment, fileOrId: string): Harness {
  if (/\.(json|ya?ml)$/i.test(fileOrId)) return specHarness(loadHarnessSpec(fileOrId), registrationFor(envConfig).systemPrompt);
  return harnessById(env, fileOrId);
}

/** The harness of the env's pool with this id. */
export function harnessById(env: Environment, id: string): Harness {
  const harness = env.harnesses().find((h) => h.id === id);
  if (!harness)
    throw new Error(
      `env ${env.id} has no harness '${id}' (it has: ${env
        .harnesses()
        .map((h) => h.id)
        .join(', ')})`,
    );
  return harness;
}

/** Spec files as harnesses on an env's system prompt, as its pool would run them. */
export function specHarnesses(registration: Pick<AnyEnvRegistration, 'systemPrompt'>, specs: readonly LoadedSpec[]): Harness[] {
  return specs.map((loaded) => specHarness(loaded, registration.systemPrompt));
}

/** The space evolution's candidates live in: the env's own, else the declarative spec space on its system prompt. */
export function harnessSpaceFor(envConfig: EnvConfig, env: Environment): HarnessSpace {
  const registration = registrationFor(envConfig);
  return registration.harnessSpace?.(env) ?? declarativeSpace(envIdOf(envConfig), registration.systemPrompt);
}

/** Failure type -> repair directions for this env: the default mapping, the env's own, then the evolution config's overrides. */
export function envFailureDirections(envConfig: EnvConfig, overrides: Partial<FailureDirections> = {}): FailureDirections {
  return failureDirectionsFor(registrationFor(envConfig).failureDirections, overrides);
}

/**
 * The spec evolution starts from: the `base` file a config names, else the
 * base of the env's pool (its frozen pool, its harness folder, or what it ships).
 */
export function baseSpecFor(envConfig: EnvConfig, env: Environment, baseFile: string | undefined): Record<string, unknown> {
  const registration = registrationFor(envConfig);
  const space = harnessSpaceFor(envConfig, env);
  let raw: unknown;
  let source: string;
  if (baseFile !== undefined) {
    source = baseFile;
    raw = registration.readHarnessFile ? registration.readHarnessFile(baseFile) : loadHarnessSpec(baseFile).spec;
  } else if (envConfig.pool !== undefined) {
    const frozen = readFrozenPool(path.join(poolsRoot(), envConfig.pool), envConfig.pool);
    const base = frozen.manifest.members.find((m) => m.direction === 'base');
    if (!base) throw new HarnessSpaceError(`frozen pool ${envConfig.pool} has no base harness`);
    source = `frozen pool ${envConfig.pool}`;
    raw = frozen.specs[base.id];
  } else if (registration.baseHarness) {
    source = `env ${envIdOf(envConfig)}'s own pool`;
    raw = registration.baseHarness(env);
  } else {
    const dir = envConfig.harnessDir ?? shippedPoolDir(registration, envConfig);
    if (dir === undefined)
      throw new HarnessSpaceError(`env ${envIdOf(envConfig)} ships no harness spec folder; set env.harnessDir or name a base file`);
    source = dir;
    raw = loadHarnessPool(specFiles(dir))[0].spec;
  }
  const checked = space.check(raw);
  if (!checked.ok) throw new HarnessSpaceError(`base harness from ${source} is invalid:\n${checked.error}`);
  if (checked.spec.direction !== 'base')
    throw new HarnessSpaceError(`base harness from ${source}: direction must be 'base', not '${String(checked.spec.direction)}'`);
  return checked.spec;
}
