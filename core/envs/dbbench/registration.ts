/** DBBench's registration (core/envs/registration.ts). */
import path from 'node:path';
import type { EnvRegistration } from '../registration';
import { DbBenchEnvConfig } from './config';
import { DbBenchEnvironment } from './environment';

export const DBBENCH_POOL_DIR = path.join(__dirname, 'harnesses');

export const dbBenchRegistration: EnvRegistration<DbBenchEnvConfig> = {
  kind: 'dbbench',
  config: DbBenchEnvConfig,
  poolDir: DBBENCH_POOL_DIR,
  // AgentBench sends its instruction as the first user turn (the env's opening), so the base harness has no system prompt.
  systemPrompt: '',
  create: (config, pool, settings) =>
    new DbBenchEnvironment({
      dataFile: config.data,
      adminUrl: config.mysqlUrl ?? settings.dbBenchMysqlUrl,
      scoring: config.scoring,
      harnesses: pool.harnesses(),
    }),
};
