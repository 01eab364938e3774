/**
 * SWE end to end on the real sandbox: the shipped instances replayed with
 * their gold patches and with none; a scripted agent making the fix through
 * the tool loop (function calls over a real OpenAI-compatible HTTP server),
 * under `harness-s eval` and the runtime; the siblings' repairs and guards;
 * and a short training run through Temporal with the recording trainer.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { harnessSRun } from '../../workflows';
import { parseRunConfig } from '../../core/config';
import { harnessById, specFiles, specHarnesses } from '../../core/envs/registry';
import { SWE_POOL_DIR, sweRegistration } from '../../core/envs/swe/registration';
import { loadHarnessPool } from '../../core/harness/spec';
import { runEpisode } from '../../core/harness/runtime';
import { PolicyClient } from '../../core/policy/client';
import { SweEnvironment, SWE_SYSTEM_PROMPT } from '../../core/envs/swe/environment';
import { loadSweData, setupInstanceSet } from '../../core/envs/swe/build';
import type { SweInstance } from '../../core/envs/swe/instances';
import { RunStore } from '../../core/store/run-store';
import { TASK_QUEUES } from '../../workflows/definitions';
import { SHIPPED_SWE_SET } from '../../cli/swe';
import { TEST_DATABASE_URL } from './env';
import { startRecordingTrainer, type RecordingTrainer } from './recording-trainer';
import { startScriptedPolicyServer, type ScriptedMessage, type ScriptedPolicyServer, type ScriptedReply } from './scripted-policy-server';
import { agentTurns, goldAgentCalls, goldAgentReply, instanceOf } from './swe-helpers';
import { startTestStack, uniqueRunId, type TestStack } from './stack';

const ROOT = path.resolve(__dirname, '../..');
const run = promisify(execFile);

// Built by `.ci/run` (harness-s swe setup); a no-op then.
setupInstanceSet(SHIPPED_SWE_SET);
const instances = loadSweData(SHIPPED_SWE_SET);
let server: ScriptedPolicyServer;
let reply: (messages: ScriptedMessage[]) => ScriptedReply;

beforeAll(async () => {
  server = await startScriptedPolicyServer((messages) => reply(messages));
});
afterAll(async () => {
  await server?.close();
});

/** Two instances with quick tests, from two packages, as a user's own SWE-bench JSONL. */
function smallDataFile(): { file: string; picked: SweInstance[] } {
  const markdown = instances.find((i) => i.instance_id === 'markdown-3.8.1')!;
  const other = instances.find((i) => i.harness_s!.package !== markdown.harness_s!.package && i.PASS_TO_PASS.length < 200)!;
  const picked = [markdown, other];
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'swe-data-')), 'instances.jsonl');
  writeFileSync(file, picked.map((i) => JSON.stringify(i)).join('\n') + '\n');
  return { file, picked };
}

describe('the shipped instances', () => {
  test('`swe replay --json`: every instance passes with its gold patch and fails without it', async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'swe', 'replay', '--json', '--concurrency', '2'], {
      cwd: ROOT,
      maxBuffer: 16 * 1024 * 1024,
    });
    const result = JSON.parse(stdout);
    expect(result.total).toBe(instances.length);
    expect(result.total).toBeGreaterThanOrEqual(20);
    expect(result.instances.filter((r: { reason: string | null }) => r.reason !== null)).toEqual([]);
    expect(result.passed).toBe(result.total);
    expect(new Set(instances.map((i) => i.harness_s!.package)).size).toBeGreaterThanOrEqual(5);
  }, 900_000);
});

describe('what the agent is given', () => {
  test("no tree's repository holds a file of the fixed release (the gold patch's new blobs are nowhere in it)", () => {
    for (const instance of instances) {
      const tree = instance.harness_s!.tree;
      // Blobs the older release itself has (an empty file, a file copied elsewhere) are not the fix's.
      const own = spawnSync('git', ['-c', 'safe.directory=*', '-C', tree, 'rev-list', '--objects', 'HEAD'], { encoding: 'utf8' })
        .stdout.split('\n')
        .map((l) => l.slice(0, 40));
      const fixed = [...instance.patch.matchAll(/^index [0-9a-f]+\.\.([0-9a-f]+)/gm)].map((m) => m[1]).filter((hash) => !/^0+$/.test(hash));
      expect(fixed.length).toBeGreaterThan(0);
      fixed.splice(0, fixed.length, ...fixed.filter((hash) => !own.some((o) => o.startsWith(hash))));
      for (const hash of fixed) {
        const found = spawnSync('git', ['-c', 'safe.directory=*', '-C', tree, 'cat-file', '-e', hash]);
        expect({ instance: instance.instance_id, hash, inTree: found.status === 0 }).toEqual({
          instance: instance.instance_id,
          hash,
          inTree: false,
        });
      }
      // Nothing unreachable either: the repository is the one commit of the older release.
      const unreachable = spawnSync('git', ['-c', 'safe.directory=*', '-C', tree, 'fsck', '--unreachable', '--no-reflogs'], {
        encoding: 'utf8',
      });
      expect({ instance: instance.instance_id, unreachable: unreachable.stdout.trim() }).toEqual({
        instance: instance.instance_id,
        unreachable: '',
      });
    }
  });
});

describe('the tool loop with a scripted agent over HTTP', () => {
  const { file, picked } = smallDataFile();
  const markdown = picked[0];
  const env = new SweEnvironment({ dataFile: file, harnesses: specHarnesses(sweRegistration, loadHarnessPool(specFiles(SWE_POOL_DIR))) });
  const episode = (harnessId: string, script: (messages: ScriptedMessage[]) => ScriptedReply, maxTurns = 30) => {
    reply = script;
    const client = new PolicyClient({ baseUrl: `${server.url}/v1`, apiKey: 'x', requestTimeoutSeconds: 60 });
    return runEpisode({
      env,
      harness: harnessById(env, harnessId),
      policy: client,
      model: 'scripted-model',
      taskId: markdown.instance_id,
      sample: 0,
      maxTurns,
      temperature: 0,
      seed: 1,
    });
  };

  test('the gold agent fixes the instance with the editor, runs the tests and submits: resolved, every turn a function call answered by a tool message', async () => {
    const t = await episode('base', (messages) => goldAgentReply(picked, messages));
    expect(t).toMatchObject({ success: true, reward: 1, failureType: null, turns: goldAgentCalls(markdown).length });
    const calls = t.messages.filter((m) => m.role === 'assistant').map((m) => m.tool_calls?.[0]?.function.name);
    expect(calls[0]).toBe('execute_bash');
    expect(calls.at(-1)).toBe('submit');
    expect(calls.filter((c) => c === 'str_replace_editor').length).toBeGreaterThan(0);
    const answers = t.messages.filter((m) => m.role === 'tool');
    expect(answers).toHaveLength(t.turns);
    expect(answers.at(-1)!.content).toMatch(/^Submitted: resolved \(FAIL_TO_PASS 10\/10, PASS_TO_PASS 413\/413\)/);
    // The request offered the three tools; the system prompt is the env's.
    expect(server.requests.at(-1)!.tools!.map((tool) => (tool as { function: { name: string } }).function.name)).toEqual([
      'execute_bash',
      'str_replace_editor',
      'submit',
    ]);
    expect(t.messages[0]).toEqual({ role: 'system', content: SWE_SYSTEM_PROMPT });
    // Tokens: one training sample whose model tokens are the scripted turns (prompts extend turn by turn).
    expect(t.samples).toHaveLength(1);
  });

  test('submitting without a change is a wrong answer, with the failing tests counted', async () => {
    const t = await episode('base', () => ({ calls: [{ name: 'submit', arguments: {} }] }));
    expect(t).toMatchObject({ success: false, failureType: 'wrong_answer', turns: 1 });
    expect(t.messages.at(-1)!.content).toMatch(/not resolved \(FAIL_TO_PASS 0\/10, PASS_TO_PASS 413\/413\)/);
  });

  test('an edit that breaks the package fails the pass-to-pass tests too; an edit of a test file is left out of the patch', async () => {
    const calls = [
      {
        name: 'str_replace_editor',
        arguments: { command: 'create', path: '/workspace/markdown/__init__.py', file_text: 'raise ImportError("broken")\n' },
      },
      {
        name: 'execute_bash',
        arguments: {
          command:
            'printf "import os\\n" > markdown/broken_probe.py && sed -i "1i raise ImportError(\\"broken\\")" markdown/core.py && echo "def pytest_runtest_makereport(item, call): pass" > tests/conftest.py',
        },
      },
    ];
    const t = await episode('base', (messages) => ({ calls: [calls[agentTurns(messages)] ?? { name: 'submit', arguments: {} }] }));
    expect(t.success).toBe(false);
    expect(t.messages.some((m) => m.role === 'tool' && /already exists/.test(m.content))).toBe(true);
    expect(t.messages.at(-1)!.content).toMatch(
      /not resolved \(FAIL_TO_PASS 0\/10, PASS_TO_PASS 0\/413; left out of the patch \(tests and test configuration are not the agent's to change\): tests\/conftest\.py\)/,
    );
  });

  test('under the base harness a tool call written as text is a format error; the action-realization sibling runs it', async () => {
    const asText = (messages: ScriptedMessage[]): ScriptedReply => {
      const call = goldAgentCalls(instanceOf(picked, messages))[agentTurns(messages)];
      return `I will now act.\n<tool_call>${JSON.stringify(call)}</tool_call>`;
    };
    const base = await episode('base', asText);
    expect(base).toMatchObject({ success: false, failureType: 'format_error', turns: 1 });
    const repaired = await episode('ar-tool-call-repair', asText);
    expect(repaired).toMatchObject({ success: true, failureType: null });
  });

  test('the trajectory-regulation sibling refuses submit until a test run', async () => {
    const t = await episode('tr-verify-before-submit', (messages) => {
      const turn = agentTurns(messages);
      if (turn === 0) return { calls: [{ name: 'submit', arguments: {} }] };
      return turn === 1
        ? {
            calls: [
              {
                name: 'execute_bash',
                arguments: { command: 'python -m pytest -q -p no:cacheprovider tests/test_syntax/inline/test_code.py | tail -1' },
              },
            ],
          }
        : { calls: [{ name: 'submit', arguments: {} }] };
    });
    expect(t.turns).toBe(3);
    expect(t.messages.filter((m) => m.role === 'tool')[0].content).toMatch(/Before submitting, run the tests/);
    expect(t.messages.at(-1)!.content).toMatch(/^Submitted: not resolved/);
  });

  test('out of turns, the workspace diff is scored as SWE-bench would: the fix without a submit still resolves', async () => {
    const edits = goldAgentCalls(markdown).filter((c) => c.name === 'str_replace_editor');
    const t = await episode(
      'base',
      (messages) => ({ calls: [edits[agentTurns(messages)] ?? { name: 'execute_bash', arguments: { command: 'true' } }] }),
      edits.length,
    );
    expect(t).toMatchObject({ turns: edits.length, success: true, reward: 1, failureType: null });
  });

  test('`harness-s eval --env swe` runs the scripted agent on one instance and stores the episode', async () => {
    reply = (messages) => goldAgentReply(picked, messages);
    const { stdout } = await run(
      process.execPath,
      [
        '--import',
        'tsx',
        'cli/main.ts',
        'eval',
        '--env',
        'swe',
        '--data',
        file,
        '--harness',
        'base',
        '--tasks',
        markdown.instance_id,
        '--base-url',
        `${server.url}/v1`,
        '--model',
        'scripted-model',
        '--max-turns',
        '30',
        '--json',
      ],
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL } },
    );
    const result = JSON.parse(stdout);
    expect(result).toMatchObject({ harness: 'base', total: 1, passed: 1 });
    // The kind is the package's normal name (PyPI's is Markdown).
    expect(result.byType).toEqual([{ type: 'markdown', total: 1, passed: 1, accuracy: 1 }]);
    const store = RunStore.connect(TEST_DATABASE_URL);
    try {
      const { rows } = await store.queryForTests(`SELECT success, messages FROM trajectories WHERE run_id = $1`, [result.evalId]);
      expect(rows).toHaveLength(1);
      expect(rows[0].success).toBe(true);
      expect(rows[0].messages.filter((m: { role: string }) => m.role === 'tool').length).toBeGreaterThan(2);
    } finally {
      await store.close();
    }
  });
});

describe('a short SWE training run through Temporal', () => {
  let trainer: RecordingTrainer;
  let stack: TestStack;

  beforeAll(async () => {
    trainer = await startRecordingTrainer();
    stack = await startTestStack();
  });
  afterAll(async () => {
    await stack?.close();
    await trainer?.close();
  });

  test('groups that all fail under the base harness are rescued by siblings, and the trainer gets the function-call turns as tokens', async () => {
    const { file, picked } = smallDataFile();
    // Under the base harness the agent submits at once (a wrong answer). Under a sibling (its system prompt
    // is longer) every other episode makes the fix and the others look around and submit: the rescued
    // groups have both outcomes, so GRPO has something to learn from.
    let siblingEpisodes = 0;
    reply = (messages) => {
      const sibling = messages[0].role === 'system' && messages[0].content !== SWE_SYSTEM_PROMPT;
      if (!sibling) return { calls: [{ name: 'submit', arguments: {} }] };
      const first = messages.find((m) => m.role === 'assistant')?.tool_calls?.[0];
      if (!first)
        return siblingEpisodes++ % 2 === 0
          ? goldAgentReply(picked, messages)
          : { calls: [{ name: 'execute_bash', arguments: { command: 'ls -la' } }] };
      return first.function.arguments.includes('ls -la')
        ? { calls: [{ name: 'submit', arguments: {} }] }
        : goldAgentReply(picked, messages);
    };
    const config = parseRunConfig({
      name: 'swe-test',
      env: { kind: 'swe', data: file },
      steps: 1,
      seed: 5,
      policy: { baseUrl: `${server.url}/v1`, model: 'scripted-model' },
      trainer: { baseUrl: trainer.url, pollSeconds: 0.01 },
      rollout: { tasksPerStep: 2, groupSize: 2, maxTurns: 30, concurrency: 2 },
      rescue: { enabled: true, k: 1 },
      router: { probeTasksPerKind: 1, probeRollouts: 1 },
      eval: { enabled: false, heldOut: 0 },
    });
    const runId = uniqueRunId('swe');
    const summary = await stack.client.workflow.execute(harnessSRun, {
      workflowId: runId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config }],
    });
    expect(summary.stepsCompleted).toBe(1);
    const { rows } = await stack.store.queryForTests(
      `SELECT task_id, role, harness_id, success, failure_type FROM trajectories WHERE run_id = $1 AND phase = 'train' ORDER BY task_id, role, harness_id`,
      [runId],
    );
    const base = rows.filter((r) => r.role === 'base');
    const rescued = rows.filter((r) => r.role === 'rescue');
    expect(base.length).toBeGreaterThan(0);
    expect(base.every((r) => !r.success && r.failure_type === 'wrong_answer')).toBe(true);
    expect(rescued.length).toBeGreaterThan(0);
    expect(rescued.every((r) => r.harness_id !== 'base')).toBe(true);
    expect(rescued.some((r) => r.success)).toBe(true);
    expect(trainer.datums.length).toBeGreaterThan(0);
    expect(trainer.optimSteps).toBe(1);
    // The datums' model tokens are the scripted turns' `<tool_call>` text, as the server returned them.
    const text = trainer.datums
      .map((d) =>
        Buffer.from(d.loss_fn_inputs.target_tokens.data.filter((id, i) => d.loss_fn_inputs.advantages.data[i] !== 0 && id < 256)).toString(
          'utf8',
        ),
      )
      .join('');
    expect(text).toContain('<tool_call>{"name":"str_replace_editor"');
    expect(text).toContain('<tool_call>{"name":"submit","arguments":{}}</tool_call>');
  }, 600_000);
});
