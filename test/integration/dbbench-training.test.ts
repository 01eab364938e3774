/**
 * DBBench through the harness runtime with a scripted policy behind a real
 * OpenAI-compatible HTTP server (token ids and logprobs as vLLM returns them):
 * AgentBench protocol edge cases, then a short training run through Temporal
 * whose Tinker-compatible test trainer checks the Datums it receives.
 */
import { harnessSRun } from '../../workflows';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { DbBenchEnvironment } from '../../core/envs/dbbench/environment';
import { goldAgentReplies } from '../../core/envs/dbbench/replay';
import { loadDbBenchTasks, type DbBenchTask } from '../../core/envs/dbbench/tasks';
import { harnessById, specFiles, specHarnesses } from '../../core/envs/registry';
import { DBBENCH_POOL_DIR, dbBenchRegistration } from '../../core/envs/dbbench/registration';
import { loadHarnessPool } from '../../core/harness/spec';
import { runEpisode } from '../../core/harness/runtime';
import { PolicyClient } from '../../core/policy/client';
import { parseRunConfig } from '../../core/config';
import { RunStore } from '../../core/store/run-store';
import { installQuietTemporalRuntime } from '../../workers/runtime';
import { createWorkers } from '../../workers/worker';
import { TASK_QUEUES } from '../../workflows/definitions';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';
import { startRecordingTrainer, type RecordingTrainer } from './recording-trainer';
import { completionTokens, startScriptedPolicyServer, type ScriptedPolicyServer } from './scripted-policy-server';
import { silentLogger, uniqueRunId } from './stack';

const DATA = path.resolve(__dirname, '../../data/dbbench/dev.jsonl');
const tasks = loadDbBenchTasks(DATA);
const taskByPrompt = (messages: Array<{ role: string; content: string }>): DbBenchTask => {
  const prompt = messages.filter((m) => m.role === 'user').map((m) => m.content);
  const task = tasks.find((t) => prompt.some((p) => p.startsWith(t.entry.description)));
  if (!task) throw new Error('scripted policy: no DBBench task in the prompt');
  return task;
};
/** The policy's own turns so far (AgentBench's opening "Ok." is not one). */
const assistantTurns = (messages: Array<{ role: string; content: string }>) =>
  messages.filter((m) => m.role === 'assistant' && m.content !== 'Ok.').length;

let server: ScriptedPolicyServer;
let reply: (messages: Array<{ role: string; content: string }>) => string;

beforeAll(async () => {
  server = await startScriptedPolicyServer((messages) => reply(messages));
});
afterAll(async () => {
  await server?.close();
});

describe('the AgentBench protocol through the runtime, with a scripted policy over HTTP', () => {
  const env = new DbBenchEnvironment({
    tasks,
    harnesses: specHarnesses(dbBenchRegistration, loadHarnessPool(specFiles(DBBENCH_POOL_DIR))),
  });
  const base = harnessById(env, 'base');
  const run = async (taskId: string, script: (turn: number, task: DbBenchTask) => string, maxTurns = 15) => {
    reply = (messages) => script(assistantTurns(messages), taskByPrompt(messages));
    const client = new PolicyClient({ baseUrl: `${server.url}/v1`, apiKey: 'x', requestTimeoutSeconds: 10 });
    return runEpisode({
      env,
      harness: base,
      policy: client,
      model: 'scripted-model',
      taskId,
      sample: 0,
      maxTurns,
      temperature: 0,
      seed: 1,
    });
  };
  const select = tasks.find((t) => t.kind === 'SELECT')!;
  const insert = tasks.find((t) => t.type === 'INSERT')!;
  afterAll(async () => {
    await env.close();
  });

  test('the gold replies solve a query task and an INSERT task', async () => {
    expect((await run(select.taskId, (turn, task) => goldAgentReplies(task)[turn])).success).toBe(true);
    expect((await run(insert.taskId, (turn, task) => goldAgentReplies(task)[turn])).success).toBe(true);
  });

  test('a reply with no action line fails the episode as a format error', async () => {
    const t = await run(select.taskId, () => 'I think the answer is 42.');
    expect(t).toMatchObject({ success: false, failureType: 'format_error', turns: 1 });
  });

  test('an Operation with no sql block is a format error', async () => {
    const t = await run(select.taskId, () => 'Action: Operation\nSELECT 1;');
    expect(t).toMatchObject({ success: false, failureType: 'format_error' });
  });

  test('multi-line SQL in the block is executed and its rows come back as the observation', async () => {
    const t = await run(select.taskId, (turn, task) =>
      turn === 0
        ? `Action: Operation\n\`\`\`sql\nSELECT\n  COUNT(*)\nFROM \`${task.entry.table.table_name}\`\n\`\`\``
        : goldAgentReplies(task)[0],
    );
    expect(t.success).toBe(true);
    const firstReply = t.messages.findIndex((m) => m.role === 'assistant' && m.content !== 'Ok.');
    const observation = t.messages[firstReply + 1].content;
    expect(observation).toBe(`[(${select.entry.table.table_info.rows.length},)]`);
  });

  test('an agent that never answers ends at the turn limit', async () => {
    const t = await run(select.taskId, () => 'Action: Operation\n```sql\nSELECT 1\n```', 3);
    expect(t).toMatchObject({ success: false, failureType: 'turn_limit' });
  });

  test('the trajectory is one token sample: prompts extend turn by turn, observations masked out', async () => {
    const t = await run(insert.taskId, (turn, task) => goldAgentReplies(task)[turn]);
    expect(t.samples).toHaveLength(1);
    const [sample] = t.samples;
    const modelTokens = sample.responseIds.filter((_, i) => sample.responseMask[i] === 1);
    const expected = goldAgentReplies(insert).flatMap((content) => completionTokens(content).ids);
    expect(modelTokens).toEqual(expected);
  });
});

describe('a short DBBench training run through Temporal', () => {
  let trainer: RecordingTrainer;
  let store: RunStore;
  let client: Client;
  let connection: Connection;
  let stopWorkers: () => Promise<void>;

  beforeAll(async () => {
    installQuietTemporalRuntime();
    trainer = await startRecordingTrainer();
    store = RunStore.connect(TEST_DATABASE_URL);
    connection = await Connection.connect({ address: TEST_TEMPORAL_ADDRESS });
    client = new Client({ connection });
    const native = await NativeConnection.connect({ address: TEST_TEMPORAL_ADDRESS });
    const group = await createWorkers({ connection: native, namespace: 'default', store, logger: silentLogger });
    const abort = new AbortController();
    const done = group.run(abort.signal);
    stopWorkers = async () => {
      abort.abort();
      await done;
      await native.close();
    };
  });
  afterAll(async () => {
    await stopWorkers?.();
    await connection?.close();
    await store?.close();
    await trainer?.close();
  });

  test('dead groups are rescued by siblings, and the trainer receives the scripted token ids with advantages only on model tokens', async () => {
    // Under the base harness (no system message) INSERT tasks always fail and other tasks
    // alternate success and failure; under any sibling (it adds a system message) the gold replies run.
    const calls = new Map<string, number>();
    reply = (messages) => {
      const t = taskByPrompt(messages);
      const turn = assistantTurns(messages);
      const sibling = messages[0].role === 'system';
      if (turn === 0 && !sibling) calls.set(t.taskId, (calls.get(t.taskId) ?? 0) + 1);
      const good = sibling || (t.type !== 'INSERT' && (calls.get(t.taskId) ?? 0) % 2 === 1);
      return good ? goldAgentReplies(t)[turn] : 'Action: Answer\nFinal Answer: ["not it"]';
    };
    const config = parseRunConfig({
      name: 'dbbench-test',
      env: { kind: 'dbbench', data: DATA },
      steps: 1,
      seed: 3,
      policy: { baseUrl: `${server.url}/v1`, model: 'scripted-model' },
      trainer: { baseUrl: trainer.url, pollSeconds: 0.01 },
      rollout: { tasksPerStep: 6, groupSize: 2, maxTurns: 15, concurrency: 2 },
      rescue: { enabled: true, k: 2 },
      router: { probeTasksPerKind: 1, probeRollouts: 1 },
    });
    const runId = uniqueRunId('dbbench');
    const summary = await client.workflow.execute(harnessSRun, { workflowId: runId, taskQueue: TASK_QUEUES.control, args: [{ config }] });
    expect(summary.stepsCompleted).toBe(1);

    const { rows } = await store.queryForTests(
      `SELECT task_id, role, harness_id, success FROM trajectories WHERE run_id = $1 AND phase = 'train' ORDER BY task_id, role, harness_id`,
      [runId],
    );
    const rescued = rows.filter((r) => r.role === 'rescue');
    expect(rescued.length).toBeGreaterThan(0);
    expect(rescued.every((r) => r.harness_id !== 'base' && r.success)).toBe(true);

    // Every datum: the positions with a non-zero advantage are exactly the scripted replies' tokens.
    expect(trainer.datums.length).toBeGreaterThan(0);
    expect(trainer.optimSteps).toBe(1);
    const replies = new Set([...tasks.flatMap((t) => goldAgentReplies(t)), 'Action: Answer\nFinal Answer: ["not it"]']);
    for (const datum of trainer.datums) {
      const targets = datum.loss_fn_inputs.target_tokens.data;
      const advantages = datum.loss_fn_inputs.advantages.data;
      const logprobs = datum.loss_fn_inputs.logprobs.data;
      expect(datum.model_input.chunks[0].tokens.length).toBe(targets.length);
      let run: number[] = [];
      let runLogprobs: number[] = [];
      const runs: Array<{ ids: number[]; logprobs: number[] }> = [];
      advantages.forEach((a, i) => {
        if (a !== 0) {
          run.push(targets[i]);
          runLogprobs.push(logprobs[i]);
        } else if (run.length) {
          runs.push({ ids: run, logprobs: runLogprobs });
          run = [];
          runLogprobs = [];
        }
      });
      if (run.length) runs.push({ ids: run, logprobs: runLogprobs });
      expect(runs.length).toBeGreaterThan(0);
      for (const r of runs) {
        expect(r.ids.at(-1)).toBe(259); // <|end|>
        const content = Buffer.from(r.ids.slice(0, -1)).toString('utf8');
        expect(replies.has(content)).toBe(true);
        expect(r.ids).toEqual(completionTokens(content).ids);
        expect(r.logprobs.map((x) => Number(x.toFixed(6)))).toEqual(completionTokens(content).logprobs.map((x) => Number(x.toFixed(6))));
      }
      // Advantages on one trajectory's model tokens share one value (its GRPO advantage / token count).
      expect(new Set(advantages.filter((a) => a !== 0)).size).toBe(1);
    }
  });
});

describe('harness-s eval', () => {
  test('evaluates an OpenAI-compatible endpoint under one harness, stores every episode and prints the per-type table', async () => {
    reply = (messages) => goldAgentReplies(taskByPrompt(messages))[assistantTurns(messages)];
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '--import',
        'tsx',
        'cli/main.ts',
        'eval',
        '--env',
        'dbbench',
        '--data',
        DATA,
        '--harness',
        'base',
        '--base-url',
        `${server.url}/v1`,
        '--model',
        'scripted-model',
        '--limit',
        '6',
        '--concurrency',
        '3',
        '--json',
      ],
      { cwd: path.resolve(__dirname, '../..'), env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL } },
    );
    const result = JSON.parse(stdout);
    expect(result).toMatchObject({ harness: 'base', model: 'scripted-model', total: 6, passed: 6 });
    expect(result.metrics.overall_cat_accuracy).toBeGreaterThan(0);
    expect(result.byType.map((row: { type: string }) => row.type)).toEqual(expect.arrayContaining(['SELECT', 'INSERT', 'UPDATE']));
    const store = RunStore.connect(TEST_DATABASE_URL);
    try {
      expect(await store.countTrajectories(result.evalId, 'eval')).toBe(6);
    } finally {
      await store.close();
    }
  });
});
