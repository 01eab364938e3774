/** DBBench's env config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, HarnessDir, oneHarnessSource } from '../config-parts';

export const DbBenchEnvConfig = z
  .strictObject({
    kind: z.literal('dbbench').describe("dbbench: AgentBench's DBBench, SQL tasks on MySQL."),
    data: z
      .string()
      .min(1)
      .describe('An AgentBench DBBench JSONL file, as the workers see it (data/dbbench/dev.jsonl ships with the project).'),
    mysqlUrl: z
      .string()
      .regex(/^mysql:\/\//, 'must be a mysql:// URL')
      .optional()
      .describe(
        "Admin connection (mysql://user:password@host:port) to the MySQL-compatible server episodes run on; absent: the workers' $DBBENCH_MYSQL_URL, else mysql://root@127.0.0.1:3306; leave it out to keep the password out of the run's history.",
      ),
    scoring: z
      .enum(['exact', 'normalized'])
      .default('exact')
      .describe("How a query's answer is matched: AgentBench v0.2's exact mode, or its later normalized mode."),
    harnessDir: HarnessDir,
    pool: FrozenPoolHash,
  })
  .superRefine(oneHarnessSource)
  .describe(
    'The DBBench env (AgentBench): each episode gets its own MySQL database and user, and the agent runs SQL on it and gives its answer.',
  );
export type DbBenchEnvConfig = z.infer<typeof DbBenchEnvConfig>;
