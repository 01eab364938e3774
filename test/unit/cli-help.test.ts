/**
 * The `harness-s` CLI as a user meets it: every command's `--help` (walked
 * over the program cli/main.ts runs), `--version`, exit codes, and what
 * `run status` tells the user to do with a run that stopped.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Command } from 'commander';
import { allCommands, buildProgram } from '../../cli/program';
import { nextStepAdvice } from '../../cli/run-advice';

const ROOT = path.resolve(__dirname, '..', '..');
const run = promisify(execFile);

function harnessS(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['cli/main.ts', ...args], { cwd: ROOT }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
  );
}

const fullName = (command: Command): string => (command.parent ? `${fullName(command.parent)} ${command.name()}` : command.name());

/** What `harness-s ... --help` prints for the command, the text added after the options included. */
function helpOf(command: Command): string {
  let text = '';
  command.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) });
  command.outputHelp();
  return text;
}

const program = buildProgram();
const commands = allCommands(program);
const leaves = commands.filter((c) => c.commands.length === 0);

/** Commands whose examples are written out in their help text by hand (not with examplesText). */
const EXAMPLES_ELSEWHERE: string[] = [];

/** Leaf commands without --json: servers that run until Ctrl-C, and commands whose output is already JSON or nothing. */
const NO_JSON: Record<string, string> = {
  'harness-s dev': 'keeps the stack up until Ctrl-C',
  'harness-s ui': 'serves the viewer until Ctrl-C',
  'harness-s mlflow serve': 'serves MLflow until Ctrl-C',
  'harness-s openenv serve': 'serves the env until Ctrl-C',
  'harness-s openenv tasks': 'prints the task file, JSON already',
  'harness-s config schema': 'prints a JSON Schema',
  'harness-s pool schema': 'prints a JSON Schema',
  'harness-s engines down': 'reports nothing',
};

test('the program has every command group, and walks to their subcommands', () => {
  const names = commands.map(fullName);
  for (const name of ['harness-s run start', 'harness-s run status', 'harness-s pool show', 'harness-s report', 'harness-s bench'])
    expect(names).toContain(name);
  expect(commands.length).toBeGreaterThan(50);
});

test.each(commands.map((c) => [fullName(c), c] as const))('`%s --help` has a description and an example', (name, command) => {
  expect(command.description().trim()).not.toBe('');
  if (EXAMPLES_ELSEWHERE.includes(name)) return;
  expect(helpOf(command)).toMatch(/\nExamples:\n {2}\$ harness-s \S/);
});

test('no help text holds a path of this machine (the checkout or the home folder)', () => {
  const home = os.homedir();
  for (const command of commands) {
    const help = helpOf(command);
    expect({ command: fullName(command), hasCheckout: help.includes(ROOT) }).toEqual({ command: fullName(command), hasCheckout: false });
    expect({ command: fullName(command), hasHome: help.includes(home) }).toEqual({ command: fullName(command), hasHome: false });
  }
});

test('every leaf command that reports something takes --json', () => {
  const without = leaves.filter((c) => !c.options.some((o) => o.long === '--json')).map(fullName);
  expect(without.sort()).toEqual(Object.keys(NO_JSON).sort());
});

test('the run id is <run> in every argument and option', () => {
  for (const command of commands) {
    for (const argument of command.registeredArguments) expect(['id', 'runId', 'run-id']).not.toContain(argument.name());
    const help = helpOf(command).replace(/--id <id> +instance id/, ''); // swe build: an instance's id
    expect({ command: fullName(command), usesId: /<id>|<runId>|<run-id>/.test(help) }).toEqual({
      command: fullName(command),
      usesId: false,
    });
  }
  const start = commands.find((c) => fullName(c) === 'harness-s run start')!;
  expect(start.options.find((o) => o.long === '--id')?.flags).toBe('--id <run>');
});

test('a run config is --config, a changes file --changes, an evolution config --evolution', () => {
  const flag = (name: string, long: string) => commands.find((c) => fullName(c) === name)!.options.find((o) => o.long === long);
  expect(flag('harness-s run fork', '--changes')).toBeDefined();
  expect(flag('harness-s run fork', '--config')).toBeUndefined();
  expect(flag('harness-s run update', '--changes')).toBeDefined();
  expect(flag('harness-s pool evolve', '--evolution')?.required).toBe(true);
  expect(flag('harness-s pool evolve', '--config')).toBeUndefined();
});

test('the root help documents the exit codes', () => {
  const help = helpOf(program);
  expect(help).toMatch(
    /Exit codes:\n {2}0 {2}ok\n {2}1 {2}failure[^\n]*\n {2}2 {2}user error: bad flags or arguments, a bad config, a file not found/,
  );
});

test("a command's own --version is its option, not the program's", async () => {
  const built = buildProgram();
  const show = allCommands(built).find((c) => fullName(c) === 'harness-s profiles show')!;
  let got: unknown = null;
  show.action(async (runId: string, opts: { version?: number }) => {
    got = { runId, version: opts.version };
  });
  await built.parseAsync(['profiles', 'show', 'r1', '--version', '3'], { from: 'user' });
  expect(got).toEqual({ runId: 'r1', version: 3 });
});

test("`harness-s --version` prints package.json's version and exits 0", async () => {
  const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const result = await harnessS('--version');
  expect(result).toMatchObject({ code: 0, stdout: `${version}\n` });
});

test('a usage error (an unknown option) exits 2 and names the option', async () => {
  const result = await harnessS('run', 'start', '--config', 'examples/sim-quickstart.json', '--nope');
  expect(result.code).toBe(2);
  expect(result.stderr).toMatch(/unknown option '--nope'/);
});

test('a run config that does not exist exits 2 and names the file, before Temporal is asked', async () => {
  const result = await harnessS('run', 'start', '--config', 'examples/no-such-config.json');
  expect(result.code).toBe(2);
  expect(result.stderr).toMatch(/examples\/no-such-config\.json: cannot read it as JSON: ENOENT/);
});

describe('what `run status` advises for a run that is not going on by itself', () => {
  test('a paused run: run resume, not run recover', () => {
    const advice = nextStepAdvice({ runId: 'r1', status: 'RUNNING', live: { paused: true } });
    expect(advice).toContain('`harness-s run resume r1`');
    expect(advice).not.toContain('recover');
  });
  test.each(['FAILED', 'TERMINATED', 'TIMED_OUT', 'CANCELLED'])('a %s run: run recover', (status) => {
    const advice = nextStepAdvice({ runId: 'r1', status, live: null });
    expect(advice).toContain('`harness-s run recover r1`');
    expect(advice).not.toContain('run resume');
  });
  test('a run going on, or completed: no advice', () => {
    expect(nextStepAdvice({ runId: 'r1', status: 'RUNNING', live: { paused: false } })).toBeNull();
    expect(nextStepAdvice({ runId: 'r1', status: 'COMPLETED', live: null })).toBeNull();
  });
});
