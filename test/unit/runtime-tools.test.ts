/** The runtime with an env that offers tools: function calls in, tool messages out, each call answered once. */
import type { Environment, Episode, StepOutcome } from '../../core/harness/environment';
import type { Harness } from '../../core/harness/harness';
import { runEpisode, toolCallAction } from '../../core/harness/runtime';
import type { Policy, PolicyReply, PolicyRequest } from '../../core/policy/client';
import type { ToolCall } from '../../core/policy/trajectory';

const TOOLS = [
  { type: 'function' as const, function: { name: 'act', description: 'do it', parameters: { type: 'object', properties: {} } } },
];

function env(steps: string[]): Environment {
  const episode: Episode = {
    task: { taskId: 't', kind: 'k' },
    instruction: () => 'do the task',
    tools: () => TOOLS,
    async step(action: string): Promise<StepOutcome> {
      steps.push(action);
      const done = steps.length >= 2;
      return { observation: `ran ${steps.length}`, done, success: done, reward: done ? 1 : 0, failureType: null };
    },
    close: async () => {},
  };
  return { id: 'fake', listTasks: () => [episode.task], describeTask: () => '', harnesses: () => [], startEpisode: async () => episode };
}

/** A harness that refuses the second turn's action (feedback, the episode goes on) and takes the others (the context counts the turn being handled from 1). */
const refusingOnce: Harness = {
  id: 'h',
  parent: null,
  direction: 'base',
  description: 'test',
  systemPrompt: () => '',
  scaffoldActions: () => [],
  shapeObservation: (o) => o,
  turnBudget: (n) => n,
  realizeAction: (text, context) =>
    context.turn === 2 ? { ok: false, retry: true, error: 'not yet' } : { ok: true, action: text, repaired: false },
};

const call = (id: string, args: object): ToolCall => ({ id, type: 'function', function: { name: 'act', arguments: JSON.stringify(args) } });

test('the first call of a turn runs; every call is answered by one tool message, also when the harness refuses it', async () => {
  const requests: PolicyRequest[] = [];
  const replies: PolicyReply[] = [
    { content: '', toolCalls: [call('a1', { n: 1 }), call('a2', { n: 2 })], promptTokenIds: [1], tokenIds: [2], logprobs: [-1] },
    { content: 'hm', toolCalls: [call('b1', { n: 3 })], promptTokenIds: [1, 2, 3], tokenIds: [4], logprobs: [-1] },
    { content: '', toolCalls: [call('c1', { n: 4 })], promptTokenIds: [1, 2, 3, 4, 5], tokenIds: [6], logprobs: [-1] },
  ];
  const policy: Policy = { complete: async (request) => (requests.push(request), replies[requests.length - 1]) };
  const steps: string[] = [];
  const t = await runEpisode({
    env: env(steps),
    harness: refusingOnce,
    policy,
    model: 'm',
    taskId: 't',
    sample: 0,
    maxTurns: 5,
    temperature: 0,
    seed: 1,
  });
  expect(steps).toEqual([toolCallAction(call('a1', { n: 1 })), toolCallAction(call('c1', { n: 4 }))]);
  expect(JSON.parse(steps[0])).toEqual({ tool: 'act', arguments: { n: 1 } });
  expect(requests.every((r) => r.tools === TOOLS)).toBe(true);
  const answers = t.messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id, m.content]);
  expect(answers).toEqual([
    ['a1', 'ran 1'],
    ['a2', 'Not run: one tool call per turn; only the first call of a turn runs.'],
    ['b1', 'not yet'],
    ['c1', 'ran 2'],
  ]);
  // Each answer follows its own assistant turn, before the next one.
  expect(t.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'assistant', 'tool', 'assistant', 'tool']);
  expect(t).toMatchObject({ success: true, turns: 3 });
});

test('a reply without a call under a tools env reaches the env as its text', async () => {
  const steps: string[] = [];
  const policy: Policy = { complete: async () => ({ content: 'just talking', promptTokenIds: [], tokenIds: [], logprobs: [] }) };
  const harness = { ...refusingOnce, realizeAction: (text: string) => ({ ok: true as const, action: text, repaired: false }) };
  const t = await runEpisode({
    env: env(steps),
    harness,
    policy,
    model: 'm',
    taskId: 't',
    sample: 0,
    maxTurns: 2,
    temperature: 0,
    seed: 1,
  });
  expect(steps).toEqual(['just talking', 'just talking']);
  expect(t.messages.filter((m) => m.role === 'tool')).toEqual([]);
});
