/**
 * Building an Environment from a run config's `env`, with its harness pool.
 */
import path from 'node:path';
import type { EnvConfig } from '../config';
import { specHarness } from '../harness/spec-harness';
import { loadHarnessPool, loadHarnessSpec, specFiles, type LoadedSpec } from '../harness/spec';
import type { Harness } from '../harness/harness';
import type { Environment } from './environment';
import { SimEnvironment } from './sim/environment';
import { DbBenchEnvironment } from './dbbench/environment';
import { CharsetEnvironment } from './charset/environment';

export const DBBENCH_POOL_DIR = path.join(__dirname, 'dbbench', 'harnesses');

export { specFiles };

/** AgentBench sends its instruction as the first user turn (the env's opening), so the base harness has no system prompt. */
export function dbBenchHarnesses(pool: readonly LoadedSpec[]): Harness[] {
  return pool.map((loaded) => specHarness(loaded, ''));
}

export function createEnvironment(env: EnvConfig): Environment {
  switch (env.kind) {
    case 'sim':
      return SimEnvironment.fromFile(env.world);
    case 'charset':
      return CharsetEnvironment.fromFile(env.tasks, env.harnessDir);
    case 'dbbench': {
      const pool = loadHarnessPool(specFiles(env.harnessDir ?? DBBENCH_POOL_DIR));
      return new DbBenchEnvironment({
        dataFile: env.data,
        adminUrl: env.mysqlUrl ?? process.env.DBBENCH_MYSQL_URL,
        scoring: env.scoring,
        harnesses: dbBenchHarnesses(pool),
      });
    }
  }
}

/** One harness for `harness-s eval`: a spec file, or the id of a harness in the env's pool. */
export function resolveHarness(env: Environment, fileOrId: string): Harness {
  if (/\.(json|ya?ml)$/i.test(fileOrId)) {
    const loaded = loadHarnessSpec(fileOrId);
    return specHarness(loaded, '');
  }
  const harness = env.harnesses().find((h) => h.id === fileOrId);
  if (!harness) throw new Error(`env ${env.id} has no harness '${fileOrId}' (it has: ${env.harnesses().map((h) => h.id).join(', ')})`);
  return harness;
}
