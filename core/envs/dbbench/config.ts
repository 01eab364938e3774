/** DBBench's env config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, oneHarnessSource } from '../config-parts';

export const DbBenchEnvConfig = z
  .strictObject({
    kind: z.literal('dbbench'),
    /** AgentBench DBBench JSONL file (the path as the worker sees it). */
    data: z.string().min(1),
    /** Admin connection to the MySQL-compatible server episodes run on; $DBBENCH_MYSQL_URL or the local server when absent. */
    mysqlUrl: z
      .string()
      .regex(/^mysql:\/\//, 'must be a mysql:// URL')
      .optional(),
    /** Query answer matching: AgentBench v0.2's exact mode, or its later normalized mode. */
    scoring: z.enum(['exact', 'normalized']).default('exact'),
    /** A folder of harness spec files (base + siblings); the shipped DBBench pool when absent. */
    harnessDir: z.string().min(1).optional(),
    /** A frozen pool (by its hash) in place of the shipped or harnessDir pool. */
    pool: FrozenPoolHash,
  })
  .superRefine(oneHarnessSource);
export type DbBenchEnvConfig = z.infer<typeof DbBenchEnvConfig>;
