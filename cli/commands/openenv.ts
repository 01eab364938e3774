/** `harness-s` openenv ...: the openenv package, the shipped keypad env's server, and task files from a server's Task API. */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import { KEYPAD_APP, KEYPAD_DIR } from '../../core/envs/openenv/install-location';
import { openEnvTasks } from '../../core/envs/openenv/client';
import { UserError } from '../runs';
import { action, positiveInt, print, printJson, progress, examplesText } from './shared';

export function registerOpenEnvCommands(program: Command): void {
  const openenv = program
    .command('openenv')
    .description('OpenEnv servers as envs (the openenv package from PyPI, 0.10)')
    .addHelpText('after', examplesText('openenv setup', 'run start --config examples/openenv.json'));
  openenv
    .command('setup')
    .description('install openenv into a Python 3.11 venv ($HARNESS_S_OPENENV_HOME, default ~/.cache/harness-s/openenv; reused when there)')
    .option('--json', 'print the install: {"venv","python"}')
    .addHelpText('after', examplesText('openenv setup', 'openenv setup --json'))
    .action(
      action(async (opts: { json?: boolean }) => {
        const { setupOpenEnv } = await import('../../infra/openenv/install');
        const installed = await setupOpenEnv(progress);
        if (opts.json) printJson(installed);
        else print(`openenv: ${installed.venv}`);
      }),
    );
  openenv
    .command('serve')
    .description(
      'serve the shipped keypad env on a TCP port, outside any sandbox, as a server started by hand (Ctrl-C stops it); point env.servers or eval --url at it',
    )
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--port <n>', 'port', positiveInt('--port'), 8300)
    .option('--sessions <n>', 'episodes at once (max_concurrent_envs)', positiveInt('--sessions'), 4)
    .addHelpText('after', examplesText('openenv serve', 'openenv serve --port 8301 --sessions 8'))
    .action(
      action(async (opts: { host: string; port: number; sessions: number }) => {
        const { setupOpenEnv } = await import('../../infra/openenv/install');
        const { python } = await setupOpenEnv(progress);
        progress(`keypad env at http://${opts.host}:${opts.port} (${opts.sessions} sessions); Ctrl-C stops it`);
        const child = spawn(
          python,
          ['-m', 'uvicorn', KEYPAD_APP, '--host', opts.host, '--port', String(opts.port), '--log-level', 'warning'],
          {
            cwd: KEYPAD_DIR,
            env: { ...process.env, OPENENV_MAX_SESSIONS: String(opts.sessions) },
            stdio: 'inherit',
          },
        );
        const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
        if (code !== 0 && code !== null) throw new UserError(`the keypad server exited with code ${code}`);
      }),
    );
  openenv
    .command('tasks')
    .description(
      "write a task file (env.tasks) from an OpenEnv server's Task API: each task's id, kind (its `kind` or the split) and reset arguments (split and index)",
    )
    .requiredOption('--url <url>', 'the server, e.g. http://127.0.0.1:8300')
    .option('--split <name>', 'the split', 'train')
    .option('--out <file>', 'write here (default: stdout)')
    .addHelpText(
      'after',
      examplesText(
        'openenv tasks --url http://127.0.0.1:8300 --out keypad-tasks.json',
        'openenv tasks --url http://127.0.0.1:8300 > keypad-tasks.json',
      ),
    )
    .action(
      action(async (opts: { url: string; split: string; out?: string }) => {
        const { envName, tasks } = await openEnvTasks({ url: opts.url }, opts.split);
        const file = {
          name: envName,
          tasks: tasks.map((task, index) => {
            const spec = (typeof task === 'object' && task !== null ? task : {}) as Record<string, unknown>;
            return {
              id: typeof spec.id === 'string' ? spec.id : `${opts.split}-${index}`,
              kind: typeof spec.kind === 'string' ? spec.kind : opts.split,
              ...(typeof spec.prompt === 'string' ? { prompt: spec.prompt } : {}),
              reset: { split: opts.split, index },
            };
          }),
        };
        const text = `${JSON.stringify(file, null, 2)}\n`;
        if (opts.out) {
          writeFileSync(opts.out, text);
          progress(`${file.tasks.length} tasks of ${envName} (${opts.split}) written to ${opts.out}`);
        } else process.stdout.write(text);
      }),
    );
}
