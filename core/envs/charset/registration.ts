/** The charset env's registration (core/envs/registration.ts). */
import type { EnvRegistration } from '../registration';
import { CharsetEnvConfig } from './config';
import { CHARSET_POOL_DIR, CharsetEnvironment, loadCharsetTasks } from './environment';

export const charsetRegistration: EnvRegistration<CharsetEnvConfig> = {
  kind: 'charset',
  config: CharsetEnvConfig,
  poolDir: CHARSET_POOL_DIR,
  // One user turn, no system prompt: the task is the whole prompt.
  systemPrompt: '',
  create: (config, pool) => new CharsetEnvironment(loadCharsetTasks(config.tasks), pool.specs()),
};
