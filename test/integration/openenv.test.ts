/**
 * env.kind "openenv" against real servers built on the `openenv` package
 * (0.10, from PyPI, installed by `harness-s openenv setup`): the shipped
 * keypad env in the workers' sandbox, the same app started by hand and
 * reached by its URL, a training run through Temporal with dead groups
 * rescued, sessions closed on cancel, no network from the sandbox, and clear
 * errors from servers that are not (or not quite) OpenEnv servers.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { existsSync, readdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { WebSocketServer } from 'ws';
import { parseRunConfig, type RunConfigInput } from '../../core/config';
import { UserError } from '../../core/errors';
import type { Environment } from '../../core/harness/environment';
import { createEnvironment, harnessById } from '../../core/envs/registry';
import { openEnvHealthy } from '../../core/envs/openenv/client';
import { KEYPAD_DIR } from '../../core/envs/openenv/install-location';
import { runEpisode } from '../../core/harness/runtime';
import { PolicyClient } from '../../core/policy/client';
import { setupOpenEnv } from '../../infra/openenv/install';
import { harnessSRun } from '../../workflows/run';
import { TASK_QUEUES } from '../../workflows/definitions';
import { TEST_DATABASE_URL } from './env';
import { startRecordingTrainer, type RecordingTrainer } from './recording-trainer';
import { startScriptedPolicyServer, type ScriptedMessage, type ScriptedPolicyServer, type ScriptedReply } from './scripted-policy-server';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

const PROBE_DIR = path.join(__dirname, 'fixtures', 'openenv-probe');
const TOOLS_DIR = path.join(__dirname, 'fixtures', 'openenv-tools');

let python: string;
let policy: ScriptedPolicyServer;
let reply: (messages: ScriptedMessage[]) => ScriptedReply;
/** The scripted policy types digits only when its prompt says the keypad reads digits (the contract sibling). */
const keypadPolicy = (messages: ScriptedMessage[]) =>
  messages.some((m) => m.role === 'system' && /reads digits only/.test(m.content)) ? '4821' : 'the usual code';

const envOf = (env: Record<string, unknown>): Environment =>
  createEnvironment(parseRunConfig({ env: { kind: 'openenv', ...env } } as RunConfigInput).env);
const episode = (env: Environment, harnessId: string, taskId: string, options: { maxTurns?: number; signal?: AbortSignal } = {}) =>
  runEpisode({
    env,
    harness: harnessById(env, harnessId),
    policy: new PolicyClient({ baseUrl: `${policy.url}/v1`, apiKey: 'x', requestTimeoutSeconds: 10 }),
    model: 'scripted-model',
    taskId,
    sample: 0,
    maxTurns: options.maxTurns ?? 3,
    temperature: 0,
    seed: 1,
    signal: options.signal,
  });

/** An app (the keypad env by default) served by hand on a TCP port (no sandbox), as a user would run an OpenEnv server. */
async function serveByHand(
  maxSessions: number,
  app = { dir: KEYPAD_DIR, name: 'keypad_env:app' },
): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(python, ['-m', 'uvicorn', app.name, '--host', '127.0.0.1', '--port', String(port), '--log-level', 'warning'], {
    cwd: app.dir,
    env: { ...process.env, OPENENV_MAX_SESSIONS: String(maxSessions) },
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    const ok = await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { url, child };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  child.kill();
  throw new Error('the keypad server started by hand did not answer');
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createTcpServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

beforeAll(async () => {
  ({ python } = await setupOpenEnv());
  policy = await startScriptedPolicyServer((messages) => reply(messages));
}, 600_000);
afterAll(async () => {
  await policy?.close();
});

describe('the shipped keypad env, served in the sandbox', () => {
  let env: Environment;
  beforeAll(() => {
    env = envOf({ local: { instances: 1, sessions: 2 } });
    reply = keypadPolicy;
  });
  afterAll(async () => {
    await env?.close?.();
  });

  test('the base harness fails, the contract sibling succeeds, with the reward the server computed', async () => {
    const base = await episode(env, 'base', 'pin-000');
    expect(base).toMatchObject({ success: false, failureType: 'wrong_answer', reward: 0 });
    expect(base.messages.find((m) => m.role === 'user')?.content).toBe('Type the PIN for the front door.');
    const sibling = await episode(env, 'ec-digits', 'pin-000');
    expect(sibling).toMatchObject({ success: true, reward: 1 });
    expect(sibling.messages.at(-1)?.content).toContain("100% of the reply's characters are digits");
  });

  test('a server starts on the first episode, and stops when the env is closed', async () => {
    const serverDirs = () =>
      readdirSync(os.tmpdir())
        .filter((name) => name.startsWith('harness-s-openenv-'))
        .sort();
    const before = serverDirs();
    const own = envOf({ local: { instances: 1, sessions: 1 } });
    expect(serverDirs()).toEqual(before);
    await expect(episode(own, 'ec-digits', 'pin-003')).resolves.toMatchObject({ success: true });
    const started = serverDirs().filter((name) => !before.includes(name));
    expect(started).toHaveLength(1);
    const socket = { socket: path.join(os.tmpdir(), started[0], 'server.sock') };
    expect(await openEnvHealthy(socket)).toBe(true);
    await own.close?.();
    expect(await openEnvHealthy(socket)).toBe(false);
    expect(serverDirs()).toEqual(before);
  });

  test('episodes at once share the server up to its sessions, and all end', async () => {
    const tasks = env.listTasks().slice(0, 6);
    const results = await Promise.all(tasks.map((t) => episode(env, 'ec-digits', t.taskId)));
    expect(results.every((r) => r.success)).toBe(true);
  });
});

describe('an OpenEnv server started by hand, by its URL', () => {
  let server: { url: string; child: ChildProcess };
  beforeAll(async () => {
    server = await serveByHand(1);
    reply = keypadPolicy;
  });
  afterAll(() => {
    server?.child.kill();
  });

  test('an episode runs against it', async () => {
    const env = envOf({ servers: [{ url: server.url, sessions: 1 }] });
    const result = await episode(env, 'ec-digits', 'year-002');
    expect(result).toMatchObject({ success: true, reward: 1 });
  });

  test('a cancelled episode closes its session on the server: the next one gets the only slot', async () => {
    // Two slots on our side, one on the server's: a session left open would make the server refuse the next one.
    const env = envOf({ servers: [{ url: server.url, sessions: 2 }] });
    const abort = new AbortController();
    reply = (messages) => {
      abort.abort();
      return keypadPolicy(messages);
    };
    await expect(episode(env, 'ec-digits', 'pin-001', { signal: abort.signal })).rejects.toThrow();
    reply = keypadPolicy;
    await new Promise((resolve) => setTimeout(resolve, 300));
    await expect(episode(env, 'ec-digits', 'pin-002')).resolves.toMatchObject({ success: true });
  });
});

describe('an MCP env: its tools offered to the policy as function calls', () => {
  let server: { url: string; child: ChildProcess };
  const toolsEnv = (url: string) =>
    envOf({
      servers: [{ url, sessions: 1 }],
      actions: 'tools',
      tasks: path.join(TOOLS_DIR, 'tasks.json'),
      harnessDir: path.join(TOOLS_DIR, 'harnesses'),
    });
  beforeAll(async () => {
    server = await serveByHand(2, { dir: TOOLS_DIR, name: 'tools_env:app' });
  });
  afterAll(() => {
    server?.child.kill();
  });

  test('the policy reads the note with one tool and opens the lock with the other; the server rewards it', async () => {
    reply = (messages) => {
      const note = messages.find((m) => m.role === 'tool' && /the code is (\d+)/.test(m.content));
      return {
        calls: [
          note ? { name: 'enter', arguments: { code: /the code is (\d+)/.exec(note.content)![1] } } : { name: 'look', arguments: {} },
        ],
      };
    };
    const asked = policy.requests.length;
    const result = await episode(toolsEnv(server.url), 'base', 'lock-0', { maxTurns: 4 });
    expect(result).toMatchObject({ success: true, reward: 1, turns: 2 });
    expect(result.messages.find((m) => m.role === 'user')?.content).toBe('Open the lock.');
    const offered = policy.requests[asked].tools as Array<{ function: { name: string; parameters: unknown } }>;
    expect(offered.map((t) => t.function.name)).toEqual(['look', 'enter']);
    expect(offered[1].function.parameters).toMatchObject({ properties: { code: { type: 'string' } }, required: ['code'] });
  });

  test('a wrong code ends the episode as a wrong answer; a reply in text or an unknown tool is told to the policy', async () => {
    let turn = 0;
    reply = () => {
      turn += 1;
      if (turn === 1) return 'I would type 1234';
      if (turn === 2) return { calls: [{ name: 'force', arguments: {} }] };
      return { calls: [{ name: 'enter', arguments: { code: '1234' } }] };
    };
    const result = await episode(toolsEnv(server.url), 'base', 'lock-0', { maxTurns: 4 });
    expect(result).toMatchObject({ success: false, reward: 0, failureType: 'wrong_answer', turns: 3 });
    const said = result.messages.filter((m) => m.role === 'user' || m.role === 'tool').map((m) => m.content);
    expect(said[1]).toMatch(/Act by calling one of the tools \(look, enter\)/);
    expect(said[2]).toMatch(/There is no tool 'force'/);
  });

  test('a server whose env takes text, not tools: a clear error', async () => {
    const keypad = await serveByHand(1);
    try {
      const env = envOf({ servers: [{ url: keypad.url, sessions: 1 }], actions: 'tools' });
      await expect(episode(env, 'base', 'pin-000')).rejects.toThrow(
        /env.actions is 'tools', but the OpenEnv server http:\/\/127.0.0.1:\d+ refused to list its tools/,
      );
    } finally {
      keypad.child.kill();
    }
  });
});

describe('the sandbox an OpenEnv server runs in', () => {
  let env: Environment;
  let listener: TcpServer;
  let connections = 0;
  beforeAll(async () => {
    listener = createTcpServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    env = envOf({
      local: { appDir: PROBE_DIR, app: 'probe_env:app' },
      tasks: path.join(PROBE_DIR, 'tasks.json'),
      harnessDir: path.join(PROBE_DIR, 'harnesses'),
    });
  });
  afterAll(async () => {
    await env?.close?.();
    listener?.close();
  });

  const play = async (command: string) => {
    reply = () => command;
    const result = await episode(env, 'base', 'probe-0');
    return result.messages.at(-1)?.content ?? '';
  };

  test("an action that makes the server reach the host's network gets nowhere: the host sees no connection", async () => {
    const { port } = listener.address() as AddressInfo;
    expect(await play(`connect 127.0.0.1:${port}`)).toMatch(/^failed: /);
    expect(await play('connect 127.0.0.1:5432')).toMatch(/^failed: /);
    expect(connections).toBe(0);
  });

  test("it cannot write to the app's folder or see the host's files", async () => {
    expect(await play('write /app/escaped.txt')).toMatch(/^failed: /);
    expect(existsSync(path.join(PROBE_DIR, 'escaped.txt'))).toBe(false);
    expect(await play('read /etc/hostname')).toMatch(/^failed: /);
    expect(await play(`read ${path.join(os.homedir(), '.bashrc')}`)).toMatch(/^failed: /);
  });
});

describe('servers that are not (quite) OpenEnv servers: clear errors', () => {
  beforeAll(() => {
    reply = () => 'anything';
  });

  /** A WebSocket server at /ws that answers each message with what `answer` gives (nothing when it gives undefined). */
  async function fakeServer(
    answer: (message: { type: string }) => string | undefined,
  ): Promise<{ url: string; closes: () => number; close: () => Promise<void> }> {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', path: '/ws' });
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
    let closes = 0;
    wss.on('connection', (socket) => {
      socket.on('close', () => (closes += 1));
      socket.on('message', (data) => {
        const out = answer(JSON.parse(data.toString()));
        if (out !== undefined) socket.send(out);
      });
    });
    const { port } = wss.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}`, closes: () => closes, close: () => new Promise((resolve) => wss.close(() => resolve())) };
  }
  const observation = (data: unknown) => JSON.stringify({ type: 'observation', data });
  const remote = (url: string, extra: Record<string, unknown> = {}) => envOf({ servers: [{ url, sessions: 1 }], stepSeconds: 1, ...extra });

  test('an unreachable server: its URL, as an outage (retried, then the run pauses), not a user error', async () => {
    const port = await freePort();
    const failed = episode(remote(`http://127.0.0.1:${port}`), 'base', 'pin-000');
    await expect(failed).rejects.toThrow(`OpenEnv server http://127.0.0.1:${port}/ws is unreachable`);
    await expect(failed).rejects.not.toBeInstanceOf(UserError);
  });

  test('an HTTP server that is not an OpenEnv server: what it answered', async () => {
    const http = await import('node:http');
    const garbage = http.createServer((_req, res) => res.end('<html>welcome</html>'));
    await new Promise<void>((resolve) => garbage.listen(0, '127.0.0.1', resolve));
    const { port } = garbage.address() as AddressInfo;
    await expect(episode(remote(`http://127.0.0.1:${port}`), 'base', 'pin-000')).rejects.toThrow(
      `OpenEnv server http://127.0.0.1:${port}/ws: HTTP 200 instead of a WebSocket session`,
    );
    await new Promise((resolve) => garbage.close(resolve));
  });

  test('a server that answers with something else than the protocol', async () => {
    const server = await fakeServer(() => 'hello');
    await expect(episode(remote(server.url), 'base', 'pin-000')).rejects.toThrow(/the answer is not JSON: hello/);
    await server.close();
  });

  test('a malformed observation: the field that is wrong', async () => {
    const server = await fakeServer(() => observation({ observation: 'not an object', done: false }));
    await expect(episode(remote(server.url), 'base', 'pin-000')).rejects.toThrow(/malformed observation after reset: observation: /);
    await server.close();
    const noText = await fakeServer(() => observation({ observation: { score: 1 }, done: false }));
    await expect(episode(remote(noText.url, { observationField: 'text' }), 'base', 'pin-000')).rejects.toThrow(
      /env.observationField 'text' is missing/,
    );
    await noText.close();
  });

  test('a server error message reaches the error', async () => {
    const server = await fakeServer(() => JSON.stringify({ type: 'error', data: { message: 'no such task', code: 'EXECUTION_ERROR' } }));
    await expect(episode(remote(server.url), 'base', 'pin-000')).rejects.toThrow(/refused reset: EXECUTION_ERROR: no such task/);
    await server.close();
  });

  test('a session that never ends stops at the turn limit, and is closed', async () => {
    const server = await fakeServer(() => observation({ observation: { text: 'go on' }, done: false, reward: null }));
    const result = await episode(remote(server.url), 'base', 'pin-000', { maxTurns: 3 });
    expect(result).toMatchObject({ success: false, failureType: 'turn_limit', turns: 3 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(server.closes()).toBe(1);
    await server.close();
  });

  test('a step that never comes back ends the episode at the time limit, and the session is closed', async () => {
    const server = await fakeServer((message) =>
      message.type === 'reset' ? observation({ observation: { text: 'ready' }, done: false }) : undefined,
    );
    const result = await episode(remote(server.url), 'base', 'pin-000');
    expect(result).toMatchObject({ success: false, failureType: 'execution_error' });
    expect(result.messages.at(-1)?.content).toContain('no answer to step within 1 s');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(server.closes()).toBe(1);
    await server.close();
  });
});

describe('a training run on the shipped keypad env, through Temporal', () => {
  let trainer: RecordingTrainer;
  let stack: TestStack;

  beforeAll(async () => {
    reply = keypadPolicy;
    trainer = await startRecordingTrainer();
    stack = await startTestStack();
  });
  afterAll(async () => {
    await stack?.close();
    await trainer?.close();
  });

  test('dead base groups are rescued by the contract sibling, and the trainer trains', async () => {
    const config = parseRunConfig({
      name: 'openenv-test',
      env: { kind: 'openenv', local: { instances: 1, sessions: 4 } },
      steps: 2,
      seed: 5,
      policy: { baseUrl: `${policy.url}/v1`, model: 'scripted-model' },
      trainer: { baseUrl: trainer.url, pollSeconds: 0.01 },
      rollout: { tasksPerStep: 3, groupSize: 3, maxTurns: 1, concurrency: 4 },
      rescue: { enabled: true, k: 3 },
      router: { probeTasksPerKind: 1, probeRollouts: 1 },
      eval: { enabled: false },
    });
    const runId = uniqueRunId('openenv');
    const summary = await stack.client.workflow.execute(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config }],
    });
    expect(summary.stepsCompleted).toBe(2);
    // What `harness-s watch` shows a user: every base group died, and siblings rescued them.
    const steps = await stack.store.steps(runId);
    expect(steps.reduce((n, s) => n + s.summary.deadGroups, 0)).toBeGreaterThan(0);
    expect(steps.reduce((n, s) => n + s.summary.rescuedGroups, 0)).toBeGreaterThan(0);
    const { rows } = await stack.store.queryForTests(
      `SELECT role, harness_id, success FROM trajectories WHERE run_id = $1 AND phase = 'train'`,
      [runId],
    );
    const base = rows.filter((r) => r.role === 'base');
    const rescue = rows.filter((r) => r.role === 'rescue');
    expect(base).toHaveLength(2 * 3 * 3);
    expect(base.every((r) => !r.success)).toBe(true);
    expect(rescue.filter((r) => r.harness_id === 'ec-digits').length).toBeGreaterThan(0);
    expect(rescue.filter((r) => r.harness_id === 'ec-digits').every((r) => r.success)).toBe(true);
    expect(rescue.filter((r) => r.harness_id !== 'ec-digits').every((r) => !r.success)).toBe(true);
    expect(trainer.optimSteps).toBe(2);
    expect(trainer.datums.length).toBeGreaterThan(0);
  });
});

describe('harness-s eval --env openenv', () => {
  const evalCli = async (...args: string[]) => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '--import',
        'tsx',
        'cli/main.ts',
        'eval',
        '--env',
        'openenv',
        '--base-url',
        `${policy.url}/v1`,
        '--model',
        'scripted-model',
        '--max-turns',
        '1',
        '--json',
        ...args,
      ],
      { cwd: path.resolve(__dirname, '../..'), env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL } },
    );
    return JSON.parse(stdout) as { total: number; passed: number; harness: string; evalId: string };
  };
  beforeAll(() => {
    reply = keypadPolicy;
  });

  test('on a server the project starts (in its sandbox): the contract sibling passes every task, the base none', async () => {
    expect(await evalCli('--harness', 'ec-digits', '--concurrency', '3')).toMatchObject({ harness: 'ec-digits', total: 15, passed: 15 });
    expect(await evalCli('--harness', 'base', '--limit', '4')).toMatchObject({ harness: 'base', total: 4, passed: 0 });
  });

  test('on a server started by hand, from its URL', async () => {
    const server = await serveByHand(2);
    try {
      expect(await evalCli('--url', server.url, '--harness', 'ec-digits', '--limit', '5', '--concurrency', '2')).toMatchObject({
        total: 5,
        passed: 5,
      });
    } finally {
      server.child.kill();
    }
  });
});
