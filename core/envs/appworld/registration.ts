/** AppWorld's registration (core/envs/registration.ts). */
import path from 'node:path';
import { UserError } from '../../errors';
import type { EnvRegistration } from '../registration';
import { sandboxSizeLimits } from '../sandbox-config';
import { AppWorldEnvConfig } from './config';
import { AppWorldEnvironment, APPWORLD_SYSTEM_PROMPT } from './environment';
import { appWorldInstall } from './install-location';

export const APPWORLD_POOL_DIR = path.join(__dirname, 'harnesses');

export const appWorldRegistration: EnvRegistration<AppWorldEnvConfig> = {
  kind: 'appworld',
  config: AppWorldEnvConfig,
  poolDir: APPWORLD_POOL_DIR,
  systemPrompt: APPWORLD_SYSTEM_PROMPT,
  create(config, pool) {
    const install = appWorldInstall();
    if (!install)
      throw new UserError(
        'env.kind appworld: the appworld package is not installed on this machine: run `npx harness-s appworld setup` (it installs it from PyPI and builds the fixture world)',
      );
    return new AppWorldEnvironment({
      appworld: install.appworld,
      root: config.root ?? install.fixtureRoot,
      cache: install.cache,
      dataset: config.dataset,
      servers: config.servers,
      harnesses: pool.harnesses(),
      limits: sandboxSizeLimits(config.sandbox),
    });
  },
  servers: (config) => [
    {
      path: 'env.servers',
      address: `${config.servers} AppWorld server(s) per worker, started by the workers`,
      note: `dataset ${config.dataset}${config.root ? ` of ${config.root}` : ' of the fixture world'}`,
    },
  ],
};
