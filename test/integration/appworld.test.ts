/**
 * AppWorld through its own environment server: the real `appworld` package
 * (from PyPI, installed by `harness-s appworld setup`) serving the fixture
 * world the project builds with the package's own code. Contract tests of
 * the protocol client against that server, then the env with a scripted
 * agent over HTTP, and `harness-s eval --env appworld`.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { AppWorldClient, AppWorldServerError } from '../../core/envs/appworld/client';
import { AppWorldEnvironment, APPWORLD_SYSTEM_PROMPT, appWorldCompletion, codeOf } from '../../core/envs/appworld/environment';
import { AppWorldServers, type Lease } from '../../core/envs/appworld/servers';
import { createEnvironment, harnessById, specFiles } from '../../core/envs/registry';
import { APPWORLD_POOL_DIR } from '../../core/envs/appworld/registration';
import { loadHarnessPool } from '../../core/harness/spec';
import { runEpisode } from '../../core/harness/runtime';
import { PolicyClient } from '../../core/policy/client';
import { RunStore } from '../../core/store/run-store';
import { loadFixtureTasks, setupAppWorld, type AppWorldInstall, type FixtureTask } from '../../infra/appworld/install';
import { TEST_DATABASE_URL } from './env';
import { startScriptedPolicyServer, type ScriptedMessage, type ScriptedPolicyServer, type ScriptedReply } from './scripted-policy-server';

const ROOT = path.resolve(__dirname, '../..');
/** Put in the worker's environment while the servers start: the agent's code must not see it. */
const CANARY = 'appworld-canary-7c1e';
const tasks = loadFixtureTasks();
const byId = (id: string) => tasks.find((t) => t.id === id)!;

let install: AppWorldInstall;
let server: ScriptedPolicyServer;
let reply: (messages: ScriptedMessage[]) => ScriptedReply;

beforeAll(async () => {
  // Done by `.ci/run` (harness-s appworld setup); a no-op then.
  install = await setupAppWorld();
  server = await startScriptedPolicyServer((messages) => reply(messages));
}, 600_000);
afterAll(async () => {
  await server?.close();
});

const fence = (code: string) => `\`\`\`python\n${code}\n\`\`\``;
const agentTurns = (messages: ScriptedMessage[]) => messages.filter((m) => m.role === 'assistant').length;
const taskOf = (messages: ScriptedMessage[]): FixtureTask => {
  const prompt = messages.find((m) => m.role === 'user')?.content ?? '';
  const task = tasks.find((t) => prompt.includes(t.instruction));
  if (!task) throw new Error('scripted AppWorld agent: no fixture task in the prompt');
  return task;
};
/** The scripted agent: the task's known-good solution, one step per turn. */
const solve = (messages: ScriptedMessage[]): ScriptedReply => {
  const steps = taskOf(messages).solution;
  return `Next step.\n${fence(steps[Math.min(agentTurns(messages), steps.length - 1)])}`;
};

describe("AppWorld's environment server, spoken to by the project's client", () => {
  let servers: AppWorldServers;
  beforeAll(() => {
    process.env.HARNESS_S_APPWORLD_CANARY = CANARY;
    servers = new AppWorldServers({ appworld: install.appworld, root: install.fixtureRoot, cache: install.cache, max: 1 });
  });
  afterAll(async () => {
    await servers?.close();
  });
  /** A fresh server with the task in view, released after `use`. */
  const withServer = async (taskId: string, use: (client: AppWorldClient, lease: Lease) => Promise<void>) => {
    const lease = await servers.lease(taskId);
    try {
      await use(lease.client, lease);
    } finally {
      lease.release();
    }
  };
  const run = async (client: AppWorldClient, taskId: string, code: string) => (await client.execute(taskId, code)).output;

  test('a full episode: initialize, execute (output, a failed execution), task_completed, close; the evaluator grades the saved world', async () => {
    const task = byId('fixnote_1');
    await withServer(task.id, async (client, lease) => {
      const world = await client.initialize(task.id, { experimentName: lease.experiment, loadGroundTruth: false });
      expect(world).toMatchObject({ task_id: task.id, instruction: task.instruction });
      expect(world.supervisor.email).toMatch(/@/);
      expect(await run(client, task.id, 'print(1 + 1)')).toBe('2\n');
      expect(await run(client, task.id, '1/0')).toMatch(/^Execution failed\. Traceback:[\s\S]*ZeroDivisionError/);
      expect(await run(client, task.id, 'print(apis.simple_note.show_note(note_id=1))')).toMatch(/^Execution failed\.[\s\S]*401/);
      expect(await client.taskCompleted(task.id)).toBe(false);
      for (const code of task.solution) await client.execute(task.id, code);
      expect(await client.taskCompleted(task.id)).toBe(true);
      expect(await client.close(task.id)).toBeNull();
      const evaluation = await lease.evaluate();
      expect(evaluation).toMatchObject({ success: true, failures: [] });
      expect(evaluation.num_tests).toBe(evaluation.passes.length);
    });
  }, 300_000);

  test('a wrong change fails its checks, each failure named with its trace', async () => {
    const task = byId('fixnote_1');
    await withServer(task.id, async (client, lease) => {
      await client.initialize(task.id, { experimentName: lease.experiment, loadGroundTruth: false });
      const wrong = task.solution.map((code) => code.replace('pick up dry cleaning, buy stamps', 'something else'));
      for (const code of wrong) await client.execute(task.id, code);
      const evaluation = await lease.evaluate();
      expect(evaluation.success).toBe(false);
      expect(evaluation.failures.length).toBeGreaterThan(0);
      expect(evaluation.failures[0].trace).toMatch(/AssertionError/);
    });
  }, 300_000);

  test("the agent's code cannot read the worker's environment or files outside what its sandbox holds", async () => {
    const task = byId('fixqa_1');
    await withServer(task.id, async (client, lease) => {
      await client.initialize(task.id, { experimentName: lease.experiment, loadGroundTruth: false });
      // The worker's own pid (this test process), and the first pids of a namespace.
      const probe = [
        'import os, pathlib',
        `for pid in [1, 2, 3, 4, ${process.pid}]:`,
        '    try:',
        "        print(pid, pathlib.Path(f'/proc/{pid}/environ').read_text())",
        '    except Exception as e:',
        "        print(pid, 'unreadable', type(e).__name__)",
        "print(pathlib.Path('/root/.pgpass').exists(), pathlib.Path('/work').exists(), pathlib.Path('/tmp').exists())",
        `print('own task', *(pathlib.Path(f'data/tasks/{p}').exists() for p in ['${task.id}/specs.json', '${task.id}/ground_truth', 'fixnote_1']))`,
      ].join('\n');
      const out = await run(client, task.id, probe);
      expect(out).not.toContain(CANARY);
      expect(out).not.toMatch(/DATABASE_URL|postgresql:\/\//);
      expect(out).toMatch(new RegExp(`^${process.pid} unreadable`, 'm'));
      expect(out).toMatch(/False False True/);
      // Its own task's specs, not its ground truth, no other task.
      expect(out).toMatch(/^own task True False False$/m);
    });
  }, 300_000);

  test("the server's own errors (an unknown task, another task's id) are HTTP errors the client names", async () => {
    await withServer('fixqa_1', async (client, lease) => {
      await expect(client.initialize('nosuch_1', { experimentName: lease.experiment })).rejects.toThrow(
        /POST \/initialize answered HTTP 500/,
      );
      await client.initialize('fixqa_1', { experimentName: lease.experiment, loadGroundTruth: false });
      await expect(client.execute('fixnote_1', 'print(1)')).rejects.toThrow(AppWorldServerError);
    });
    await expect(servers.lease('nosuch_1')).rejects.toThrow(/nosuch_1/);
  }, 300_000);
});

describe('the AppWorld env with a scripted agent over HTTP', () => {
  let env: AppWorldEnvironment;
  beforeAll(() => {
    env = createEnvironment({ kind: 'appworld', dataset: 'fixture', servers: 2 }) as AppWorldEnvironment;
  });
  afterAll(async () => {
    await env?.close();
  });
  const episode = (taskId: string, harnessId: string, script: (messages: ScriptedMessage[]) => ScriptedReply, maxTurns = 10) => {
    reply = script;
    const policy = new PolicyClient({ baseUrl: `${server.url}/v1`, apiKey: 'x', requestTimeoutSeconds: 60 });
    return runEpisode({
      env,
      harness: harnessById(env, harnessId),
      policy,
      model: 'scripted-model',
      taskId,
      sample: 0,
      maxTurns,
      temperature: 0,
      seed: 1,
    });
  };

  test('tasks come from the fixture dataset, kinds are difficulty levels', () => {
    expect(
      env
        .listTasks()
        .map((t) => t.taskId)
        .sort(),
    ).toEqual(tasks.map((t) => t.id).sort());
    expect(new Set(env.listTasks().map((t) => t.kind))).toEqual(new Set(tasks.map((t) => `difficulty_${t.difficulty}`)));
    expect(env.describeTask('fixqa_1')).toContain(byId('fixqa_1').instruction);
  });

  test('the scripted agent completes a write task and a question task; the episode ends when complete_task is called', async () => {
    for (const id of ['fixtodo_2', 'fixqa_2']) {
      const t = await episode(id, 'base', solve);
      expect(t).toMatchObject({ success: true, reward: 1, failureType: null, turns: byId(id).solution.length });
      expect(t.messages[0]).toEqual({ role: 'system', content: APPWORLD_SYSTEM_PROMPT });
      expect(t.messages.at(-1)!.content).toMatch(/Task completed: success/);
    }
  });

  test('a wrong answer is graded as one; running out of turns is graded on the world as left', async () => {
    const qa = byId('fixqa_1');
    const wrong = await episode(qa.id, 'base', (messages) => {
      const code = qa.solution[agentTurns(messages)].replace(/complete_task\(.*\)$/m, 'complete_task(answer=999)');
      return fence(code);
    });
    expect(wrong).toMatchObject({ success: false, failureType: 'wrong_answer' });
    const write = byId('fixnote_1');
    const withoutComplete = write.solution.filter((code) => !code.includes('complete_task'));
    const outOfTurns = await episode(write.id, 'base', (messages) => fence(withoutComplete[agentTurns(messages)]), withoutComplete.length);
    // The world is graded as left: the note is there, but a task never completed has no answer ("<<NOT_GIVEN>>"), which fails its answer check.
    expect(outOfTurns).toMatchObject({ turns: withoutComplete.length, success: false, failureType: 'turn_limit' });
    expect(outOfTurns.messages.at(-1)!.content).toMatch(
      /^Out of turns\.\nNot completed: fail \(3\/4 checks pass; failed: assert the task was completed without an answer/,
    );
  });

  test('under the base harness code without a fence is a format error; the action-realization sibling wraps it', async () => {
    const bare = (messages: ScriptedMessage[]) => taskOf(messages).solution[agentTurns(messages)];
    expect(await episode('fixnote_2', 'base', bare)).toMatchObject({ success: false, failureType: 'format_error', turns: 1 });
    expect(await episode('fixnote_2', 'ar-code-block-repair', bare)).toMatchObject({ success: true });
  });

  test('the trajectory-regulation sibling refuses complete_task until the data was looked at', async () => {
    const qa = byId('fixqa_2');
    const t = await episode(qa.id, 'tr-verify-before-complete', (messages) =>
      fence(
        agentTurns(messages) === 0
          ? `apis.supervisor.complete_task(answer=${JSON.stringify(qa.answer)})`
          : qa.solution[agentTurns(messages) - 1],
      ),
    );
    expect(t.messages[3].content).toMatch(/Before completing, look at the data/);
    expect(t.success).toBe(true);
  });

  test('episodes at once each get their own server (one world per server, never reused)', async () => {
    const results = await Promise.all(['fixnote_1', 'fixqa_1', 'fixtodo_1'].map((id) => episode(id, 'base', solve)));
    expect(results.map((r) => r.success)).toEqual([true, true, true]);
    // Two spare servers and one spare evaluator, at most, once the episodes are over.
    expect(env.runningServers).toBeLessThanOrEqual(3);
  });
});

describe('harness-s eval --env appworld', () => {
  test('the scripted agent completes every fixture task; AppWorld figures: task and scenario goal completion', async () => {
    reply = (messages) => (taskOf(messages).id === 'fixtodo_1' ? fence('apis.supervisor.complete_task()') : solve(messages));
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '--import',
        'tsx',
        'cli/main.ts',
        'eval',
        '--env',
        'appworld',
        '--harness',
        'base',
        '--base-url',
        `${server.url}/v1`,
        '--model',
        'scripted-model',
        '--concurrency',
        '2',
        '--max-turns',
        '10',
        '--json',
      ],
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL }, maxBuffer: 8 * 1024 * 1024 },
    );
    const result = JSON.parse(stdout);
    // fixtodo_1 is completed without doing it: its scenario (fixtodo) fails, the other two hold.
    expect(result).toMatchObject({ harness: 'base', total: tasks.length, passed: tasks.length - 1 });
    const expected = appWorldCompletion(tasks.map((t) => ({ taskId: t.id, success: t.id !== 'fixtodo_1' })));
    expect(expected).toEqual({ taskGoalCompletion: 83.3, scenarioGoalCompletion: 66.7 });
    expect(result.metrics).toEqual({ task_goal_completion: 83.3, scenario_goal_completion: 66.7 });
    const store = RunStore.connect(TEST_DATABASE_URL);
    try {
      expect(await store.countTrajectories(result.evalId, 'eval')).toBe(tasks.length);
    } finally {
      await store.close();
    }
  }, 300_000);
});

describe('the shipped AppWorld pool', () => {
  test("base first, then one sibling per direction; a reply's first code block is the code", () => {
    const pool = loadHarnessPool(specFiles(APPWORLD_POOL_DIR));
    expect(pool.map((p) => p.spec.direction)).toEqual([
      'base',
      'action_realization',
      'environment_contract',
      'procedural_skill',
      'trajectory_regulation',
    ]);
    expect(codeOf('text\n```python\nprint(1)\n```\nmore')).toBe('print(1)\n');
  });
});
