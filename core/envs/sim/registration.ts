/**
 * The sim's registration (core/envs/registration.ts). Its harnesses are not
 * HarnessSpec files but SimHarness entries of its world file, so it resolves
 * its own pool and brings its own harness space for evolution.
 */
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { checkFrozenVersions } from '../../harness/frozen-pool';
import { splitPool } from '../../harness/pool';
import { HarnessSpaceError } from '../../evolution/harness-space';
import type { EnvPool, EnvRegistration } from '../registration';
import { SimEnvConfig } from './config';
import { SIM_KIND } from '../../sim-kind';
import { SimEnvironment } from './environment';
import { simHarnessSpace } from './harness-space';
import { loadSimWorld, readSimHarnessDir, withHarnessFiles, type SimWorld } from './world';

export const simRegistration: EnvRegistration<SimEnvConfig> = {
  kind: SIM_KIND,
  config: SimEnvConfig,
  // The sim's agent reads hints from its harness, not a protocol prompt.
  systemPrompt: '',
  // The sim's wrong answers are early finishes (a required behaviour skipped): they also call for verifying before finishing.
  failureDirections: { wrong_answer: ['environment_contract', 'procedural_skill', 'trajectory_regulation'] },
  create: (config, pool) => new SimEnvironment(simWorld(config, pool)),
  harnessSpace: (env) => simHarnessSpace((env as SimEnvironment).world),
  baseHarness: (env) => splitPool((env as SimEnvironment).world.harnesses).base,
  readHarnessFile(file) {
    try {
      return JSON.parse(readFileSync(file, 'utf8'));
    } catch (err) {
      throw new HarnessSpaceError(`base harness ${file}: cannot read it as JSON: ${(err as Error).message}`);
    }
  },
};

/** The sim world of a config, with the harnesses of its frozen pool or harness folder in place of the world file's. */
function simWorld(config: SimEnvConfig, pool: EnvPool): SimWorld {
  const world = loadSimWorld(config.world);
  if (config.harnessDir !== undefined) return withHarnessFiles(world, readSimHarnessDir(config.harnessDir));
  const frozen = pool.frozen();
  if (frozen === undefined) return world;
  const replaced = withHarnessFiles(
    world,
    frozen.manifest.members.map((m) => ({ file: path.join(frozen.dir, m.file), spec: frozen.specs[m.id] })),
  );
  checkFrozenVersions(frozen, new SimEnvironment(replaced).harnesses());
  return replaced;
}
