/** DBBench's registration (core/envs/registration.ts). */
import path from 'node:path';
import { redactedUrl } from '../../config-check';
import type { EnvRegistration } from '../registration';
import { DbBenchEnvConfig } from './config';
import { DbBenchEnvironment } from './environment';
import { DEFAULT_DBBENCH_MYSQL_URL } from './mysql-server';

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
  servers: (config) => [
    config.mysqlUrl
      ? {
          path: 'env.mysqlUrl',
          address: redactedUrl(config.mysqlUrl),
          note: 'MySQL admin login; each episode gets its own database and user',
        }
      : {
          path: 'env.mysqlUrl',
          address: "the workers' $DBBENCH_MYSQL_URL",
          note: `env.mysqlUrl not set; ${DEFAULT_DBBENCH_MYSQL_URL} when that is unset too`,
        },
  ],
};
