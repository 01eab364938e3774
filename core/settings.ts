/**
 * The settings a process takes from its environment, read once at process
 * start (`processSettings()`) and passed down from there. Code below the
 * entry points takes what it needs as arguments and never reads
 * `process.env` for these itself.
 */

export interface Settings {
  /** $DBBENCH_MYSQL_URL: the admin connection DBBench episodes run on, when a config names none. */
  dbBenchMysqlUrl: string | undefined;
  /** $LOG_LEVEL: pino's level for the workers' and the CLI's logs, when the caller sets none. */
  logLevel: string | undefined;
}

let settings: Settings | undefined;

/** This process's settings, read from its environment the first time they are asked for. */
export function processSettings(): Settings {
  settings ??= {
    dbBenchMysqlUrl: process.env.DBBENCH_MYSQL_URL || undefined,
    logLevel: process.env.LOG_LEVEL || undefined,
  };
  return settings;
}
