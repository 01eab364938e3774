/**
 * Running an install step with its output appended to a log file: the setup
 * commands (engines, AppWorld, OpenEnv) print one line per step and keep the
 * tools' own output in their logs.
 */
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';

export interface LoggedOptions {
  logFile: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** The error a failure is thrown as (the setup's own error class). */
  error: (message: string) => Error;
}

/** Runs `command`; on a non-zero exit, fails with the command, its exit code and its last 25 lines of output. */
export async function runLogged(command: string, args: readonly string[], options: LoggedOptions): Promise<void> {
  const out = createWriteStream(options.logFile, { flags: 'a' });
  const shown = `${command} ${args.join(' ')}`;
  out.write(`\n$ ${shown}\n`);
  let tail = '';
  const keep = (chunk: Buffer) => {
    out.write(chunk);
    tail = (tail + chunk.toString('utf8')).slice(-16_000);
  };
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(command, args, { env: options.env ?? process.env, cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', (err) => reject(options.error(`\`${shown}\` could not start: ${err.message}`)));
    child.on('close', resolve);
  }).finally(() => new Promise((resolve) => out.end(resolve)));
  if (code !== 0) {
    throw options.error(
      `\`${shown}\` failed (exit ${code}); its last output (full log: ${options.logFile}):\n${tail.trimEnd().split('\n').slice(-25).join('\n')}`,
    );
  }
}
