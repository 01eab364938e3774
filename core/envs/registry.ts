/**
 * Building an Environment from a run config's `env`, with its harness pool:
 * the env's shipped pool, a folder of harness files (`harnessDir`), or a
 * frozen pool named by its hash (`pool`).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { EnvConfig } from '../config';
import { specHarness } from '../harness/spec-harness';
import { loadHarnessPool, loadHarnessSpec, specFiles, type LoadedSpec } from '../harness/spec';
import type { Harness } from '../harness/harness';
import { FrozenPoolError, poolsRoot, readFrozenPool, type FrozenPool } from '../harness/frozen-pool';
import type { Environment } from './environment';
import { SimEnvironment } from './sim/environment';
import { loadSimWorld, readSimHarnessDir, withHarnessFiles, type SimWorld } from './sim/world';
import { DbBenchEnvironment } from './dbbench/environment';
import { CharsetEnvironment, loadCharsetTasks } from './charset/environment';
import { SweEnvironment, SWE_SYSTEM_PROMPT } from './swe/environment';
import { AppWorldEnvironment, APPWORLD_SYSTEM_PROMPT } from './appworld/environment';
import { appWorldInstall } from './appworld/install-location';
import { UserError } from '../errors';

export const DBBENCH_POOL_DIR = path.join(__dirname, 'dbbench', 'harnesses');
export const SWE_POOL_DIR = path.join(__dirname, 'swe', 'harnesses');
export const APPWORLD_POOL_DIR = path.join(__dirname, 'appworld', 'harnesses');

export { specFiles };

/** AgentBench sends its instruction as the first user turn (the env's opening), so the base harness has no system prompt. */
export function dbBenchHarnesses(pool: readonly LoadedSpec[]): Harness[] {
  return pool.map((loaded) => specHarness(loaded, ''));
}

/** A spec pool on the env's system prompt (a spec's own systemPrompt replaces it). */
function specPool(pool: readonly LoadedSpec[], envSystemPrompt: string): Harness[] {
  return pool.map((loaded) => specHarness(loaded, envSystemPrompt));
}

export function sweHarnesses(pool: readonly LoadedSpec[]): Harness[] {
  return specPool(pool, SWE_SYSTEM_PROMPT);
}

export function createEnvironment(env: EnvConfig): Environment {
  switch (env.kind) {
    case 'sim':
      return new SimEnvironment(simWorld(env));
    case 'charset':
      return env.pool === undefined
        ? CharsetEnvironment.fromFile(env.tasks, env.harnessDir)
        : new CharsetEnvironment(loadCharsetTasks(env.tasks), frozenSpecPool(frozenPool(env.kind, env.pool)));
    case 'dbbench': {
      const pool = env.pool === undefined ? loadHarnessPool(specFiles(env.harnessDir ?? DBBENCH_POOL_DIR)) : frozenSpecPool(frozenPool(env.kind, env.pool));
      return new DbBenchEnvironment({
        dataFile: env.data,
        adminUrl: env.mysqlUrl ?? process.env.DBBENCH_MYSQL_URL,
        scoring: env.scoring,
        harnesses: dbBenchHarnesses(pool),
      });
    }
    case 'swe': {
      const pool = env.pool === undefined ? loadHarnessPool(specFiles(env.harnessDir ?? SWE_POOL_DIR)) : frozenSpecPool(frozenPool(env.kind, env.pool));
      return new SweEnvironment({ dataFile: env.data, harnesses: sweHarnesses(pool) });
    }
    case 'appworld': {
      const pool = env.pool === undefined ? loadHarnessPool(specFiles(env.harnessDir ?? APPWORLD_POOL_DIR)) : frozenSpecPool(frozenPool(env.kind, env.pool));
      const install = appWorldInstall();
      if (!install) throw new UserError('env.kind appworld: the appworld package is not installed on this machine: run `npx harness-s appworld setup` (it installs it from PyPI and builds the fixture world)');
      return new AppWorldEnvironment({
        appworld: install.appworld, root: env.root ?? install.fixtureRoot, cache: install.cache,
        dataset: env.dataset, servers: env.servers, harnesses: specPool(pool, APPWORLD_SYSTEM_PROMPT),
      });
    }
  }
}

/** The sim world of a config, with the harnesses of its frozen pool or harness folder in place of the world file's. */
function simWorld(env: Extract<EnvConfig, { kind: 'sim' }>): SimWorld {
  const world = loadSimWorld(env.world);
  if (env.harnessDir !== undefined) return withHarnessFiles(world, readSimHarnessDir(env.harnessDir));
  if (env.pool === undefined) return world;
  const frozen = frozenPool(env.kind, env.pool);
  const members = frozen.manifest.members;
  const replaced = withHarnessFiles(world, members.map((m) => ({ file: path.join(frozen.dir, m.file), spec: frozen.specs[m.id] })));
  keepsFrozenVersions(frozen, new SimEnvironment(replaced).harnesses());
  return replaced;
}

/** A frozen pool of `envId`, verified against its hash; where it was looked for when it is not there. */
function frozenPool(envId: string, hash: string): FrozenPool {
  const root = poolsRoot();
  const dir = path.join(root, hash);
  if (!existsSync(dir)) {
    throw new FrozenPoolError(`env.pool: no frozen pool ${hash} here: looked in ${dir} ($HARNESS_S_POOLS_DIR sets the folder frozen pools are kept in; now ${root})`);
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
  keepsFrozenVersions(frozen, pool.map((loaded) => ({ id: loaded.spec.id, version: loaded.version })));
  return pool;
}

/**
 * Each harness as the env reads it must have the version it was frozen with,
 * so a run's recorded pool hash is the hash of the folder it named: a spec
 * frozen without the defaults its env fills in would read as another version.
 */
function keepsFrozenVersions(frozen: FrozenPool, harnesses: ReadonlyArray<{ id: string; version?: string }>): void {
  for (const member of frozen.manifest.members) {
    const file = path.join(frozen.dir, member.file);
    const harness = harnesses.find((h) => h.id === member.id);
    if (!harness) throw new FrozenPoolError(`frozen pool ${frozen.manifest.hash}: ${file} does not define harness '${member.id}', the id its manifest lists it under`);
    if (harness.version !== member.version) {
      throw new FrozenPoolError(
        `frozen pool ${frozen.manifest.hash}: ${file} reads as version ${harness.version ?? '(none)'}, but was frozen as ${member.version}: ` +
          'a pool must be frozen with each spec as its env parses it (every default filled in)',
      );
    }
  }
}

/** The env protocols' own system prompts (DBBench has none: AgentBench opens with a user turn). */
export const ENV_SYSTEM_PROMPTS: Record<string, string> = { swe: SWE_SYSTEM_PROMPT, appworld: APPWORLD_SYSTEM_PROMPT };

/** One harness for `harness-s eval`: a spec file, or the id of a harness in the env's pool. */
export function resolveHarness(env: Environment, fileOrId: string): Harness {
  if (/\.(json|ya?ml)$/i.test(fileOrId)) {
    const loaded = loadHarnessSpec(fileOrId);
    return specHarness(loaded, ENV_SYSTEM_PROMPTS[env.id] ?? '');
  }
  const harness = env.harnesses().find((h) => h.id === fileOrId);
  if (!harness) throw new Error(`env ${env.id} has no harness '${fileOrId}' (it has: ${env.harnesses().map((h) => h.id).join(', ')})`);
  return harness;
}
