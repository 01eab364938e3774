/** What every `harness-s` command shares: output, exit codes, the run store, option parsers. */
import { InvalidArgumentError, Option } from 'commander';
import { existsSync } from 'node:fs';
import { WorkflowFailedError } from '@temporalio/client';
import { filesNamedBy, type RunConfig } from '../../core/config';
import { databaseUrlFromEnv, dbPoolSizeFromEnv, migrate, RunStore } from '../../core/store/run-store';
import { rootCauseMessage, UserError } from '../runs';
export function progress(line: string): void {
  process.stderr.write(`${line}\n`);
}
export function print(text: string): void {
  process.stdout.write(`${text}\n`);
}
export function printJson(value: unknown): void {
  print(JSON.stringify(value, null, 2));
}

export function action<A extends unknown[]>(fn: (...args: A) => Promise<void>) {
  return async (...args: A) => {
    try {
      await fn(...args);
      process.exit(process.exitCode ?? 0);
    } catch (err) {
      progress(
        `harness-s: ${err instanceof WorkflowFailedError ? `run failed: ${rootCauseMessage(err)}` : err instanceof Error ? err.message : String(err)}`,
      );
      process.exit(err instanceof UserError ? 2 : 1);
    }
  };
}

/** Runs `fn` with the run store ($DATABASE_URL, at most $HARNESS_S_DB_POOL_SIZE connections), migrated, and closes it after. */
export async function withStore<T>(fn: (store: RunStore) => Promise<T>): Promise<T> {
  const databaseUrl = databaseUrlFromEnv();
  const poolSize = dbPoolSizeFromEnv();
  await migrate(databaseUrl);
  const store = RunStore.connect(databaseUrl, undefined, poolSize);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

export function positiveInt(name: string) {
  return (value: string) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${name} must be a whole number of at least 1 (got '${value}')`);
    return n;
  };
}

export function nonNegativeInt(name: string) {
  return (value: string) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a whole number of at least 0 (got '${value}')`);
    return n;
  };
}

/** The files a config names that this machine does not have. */
export function missingFiles(config: RunConfig): Array<{ path: string; file: string }> {
  return filesNamedBy(config).filter(({ file }) => !existsSync(file));
}

/** The exit codes every command keeps; the root `--help` lists them. */
export const EXIT_CODES_HELP = `Exit codes:
  0  ok
  1  failure: a run, check or service failed
  2  user error: bad flags or arguments, a bad config, a file not found`;

/** An "Examples:" section for a command's `--help` (addHelpText('after', ...)): one `harness-s` command a line. */
export function examplesText(...lines: string[]): string {
  return `\nExamples:\n${lines.map((line) => `  $ harness-s ${line}`).join('\n')}`;
}

/** An option whose default is a path of this machine: `--help` shows `shown` (relative or symbolic), the action gets `value`. */
export function optionWithDefault(flags: string, description: string, value: string, shown: string): Option {
  return new Option(flags, description).default(value, shown);
}
