/** The runtime marks what the harness did to the conversation, on the message it shaped. */
import type { Environment, Episode, StepOutcome } from '../../core/harness/environment';
import type { Harness } from '../../core/harness/harness';
import { runEpisode } from '../../core/harness/runtime';
import type { Policy } from '../../core/policy/client';

function env(): Environment {
  const episode: Episode = {
    task: { taskId: 't', kind: 'k' },
    instruction: () => 'do the task',
    async step(action: string): Promise<StepOutcome> {
      const done = action === 'finish';
      return { observation: `ran ${action} (${'x'.repeat(40)})`, done, success: done, reward: done ? 1 : 0, failureType: null };
    },
    close: async () => {},
  };
  return { id: 'fake', listTasks: () => [episode.task], describeTask: () => '', harnesses: () => [], startEpisode: async () => episode };
}

/** Context, a scaffold action, a repair, a refusal with feedback, a hint and a cut observation. */
const busy: Harness = {
  id: 'busy',
  parent: 'base',
  direction: 'base',
  description: 'test',
  systemPrompt: () => 'Docs: the schema is injected here.',
  scaffoldActions: () => ['look'],
  realizeAction: (text) => {
    if (text === 'bad') return { ok: false, retry: true, error: 'say it as one word' };
    if (text.startsWith(' ')) return { ok: true, action: text.trim(), repaired: true };
    return { ok: true, action: text, repaired: false };
  },
  shapeObservation: (o, context) => (context.turn === 1 ? `${o}\nHint: finish now` : o.length > 30 ? o.slice(0, 30) : o),
  turnBudget: (n) => n,
};

test('the system prompt, a scaffold action, a repair, a refusal and shaped observations are marked on the messages they shaped', async () => {
  const replies = [' step', 'bad', 'finish'];
  let turn = 0;
  const policy: Policy = { complete: async () => ({ content: replies[turn++], promptTokenIds: [1], tokenIds: [2], logprobs: [-0.5] }) };
  const t = await runEpisode({
    env: env(),
    harness: busy,
    policy,
    model: 'm',
    taskId: 't',
    sample: 0,
    maxTurns: 5,
    temperature: 0,
    seed: 1,
  });
  const marked = (t.interventions ?? []).map((i) => [t.messages[i.message].role, i.kind, i.detail]);
  expect(marked).toEqual([
    ['system', 'context', 'system prompt of harness busy'],
    ['user', 'scaffold', 'look'],
    ['assistant', 'repair', ' step\n→ step'],
    ['user', 'observation', 'Hint: finish now'],
    ['user', 'refusal', 'say it as one word'],
    ['user', 'observation', `cut from ${'ran finish ('.length + 41} to 30 characters`],
  ]);
  expect(t.messages.map((m) => m.role)).toEqual(['system', 'user', 'user', 'assistant', 'user', 'assistant', 'user', 'assistant', 'user']);
});

test('a harness that changes nothing leaves no mark', async () => {
  const plain: Harness = {
    ...busy,
    systemPrompt: () => '',
    scaffoldActions: () => [],
    shapeObservation: (o) => o,
    realizeAction: (text) => ({ ok: true, action: text, repaired: false }),
  };
  const policy: Policy = { complete: async () => ({ content: 'finish', promptTokenIds: [1], tokenIds: [2], logprobs: [-0.5] }) };
  const t = await runEpisode({
    env: env(),
    harness: plain,
    policy,
    model: 'm',
    taskId: 't',
    sample: 0,
    maxTurns: 2,
    temperature: 0,
    seed: 1,
  });
  expect(t.interventions).toEqual([]);
});
