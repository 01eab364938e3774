/** The OpenEnv env's registration (core/envs/registration.ts): episodes against OpenEnv servers, remote or started by the worker. */
import path from 'node:path';
import { UserError } from '../../errors';
import type { EnvRegistration } from '../registration';
import { OpenEnvEnvConfig, OPENENV_KIND } from './config';
import { KEYPAD_TASKS_FILE, loadOpenEnvTasks, OpenEnvEnvironment } from './environment';
import { KEYPAD_APP, KEYPAD_DIR, openEnvInstall } from './install-location';
import { LocalServers, remoteSlots } from './servers';

export const OPENENV_POOL_DIR = path.join(KEYPAD_DIR, 'harnesses');

export const openEnvRegistration: EnvRegistration<OpenEnvEnvConfig> = {
  kind: OPENENV_KIND,
  config: OpenEnvEnvConfig,
  poolDir: OPENENV_POOL_DIR,
  // The reset observation is the user's first message; the task needs no protocol prompt.
  systemPrompt: '',
  create(config, pool, _settings, services) {
    const tasks = loadOpenEnvTasks(config.tasks ?? KEYPAD_TASKS_FILE);
    const common = { config, tasks, harnesses: pool.harnesses() };
    if (config.servers) {
      // A worker counts remote servers' sessions for every host (the run store's leases); the CLI's eval counts its own.
      const slots = remoteSlots(config.servers, services.sessionLeases);
      return new OpenEnvEnvironment({ ...common, acquire: (signal) => slots.acquire(signal), close: async () => slots.close?.() });
    }
    const install = openEnvInstall();
    if (!install)
      throw new UserError(
        'env.kind openenv: the openenv package is not installed on this machine: run `npx harness-s openenv setup` (it installs it from PyPI), or give env.servers (servers already running)',
      );
    const local = new LocalServers(
      {
        venv: install.venv,
        appDir: path.resolve(config.local.appDir ?? KEYPAD_DIR),
        app: config.local.app ?? KEYPAD_APP,
        sessions: config.local.sessions,
      },
      config.local.instances,
    );
    return new OpenEnvEnvironment({ ...common, acquire: (signal) => local.acquire(signal), close: () => local.close() });
  },
  servers: (config) =>
    config.servers
      ? config.servers.map((server, i) => ({
          path: `env.servers.${i}.url`,
          address: server.url,
          note: `OpenEnv server, ${server.sessions} session(s) at once`,
        }))
      : [
          {
            path: 'env.local',
            address: `${config.local.instances} OpenEnv server(s) per worker, started by the workers`,
            note: `app ${config.local.app ?? `${KEYPAD_APP} (the shipped keypad env)`}, ${config.local.sessions} session(s) each`,
          },
        ],
};
