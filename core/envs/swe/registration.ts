/** The SWE env's registration (core/envs/registration.ts). */
import path from 'node:path';
import type { EnvRegistration } from '../registration';
import { sandboxSizeLimits } from '../sandbox-config';
import { SweEnvConfig } from './config';
import { SweEnvironment, SWE_SYSTEM_PROMPT } from './environment';

export const SWE_POOL_DIR = path.join(__dirname, 'harnesses');

export const sweRegistration: EnvRegistration<SweEnvConfig> = {
  kind: 'swe',
  config: SweEnvConfig,
  poolDir: SWE_POOL_DIR,
  systemPrompt: SWE_SYSTEM_PROMPT,
  create: (config, pool) =>
    new SweEnvironment({ dataFile: config.data, harnesses: pool.harnesses(), limits: sandboxSizeLimits(config.sandbox) }),
};
