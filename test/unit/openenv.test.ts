/**
 * The OpenEnv env's pure parts: its config, how an observation reads, what
 * action a reply becomes, the task file, and how episodes share servers.
 * The protocol itself is tested against real servers
 * (test/integration/openenv.test.ts).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { OpenEnvEnvConfig } from '../../core/envs/openenv/config';
import { KEYPAD_TASKS_FILE, loadOpenEnvTasks, openEnvAction, renderObservation, toolDefinition } from '../../core/envs/openenv/environment';
import { SessionSlots } from '../../core/envs/openenv/servers';

const tools = [
  { name: 'look', description: 'Read the note.', input_schema: { type: 'object', properties: {} } },
  { name: 'enter', description: 'Type a code.', input_schema: { type: 'object', properties: { code: { type: 'string' } } } },
];

describe('the openenv env config', () => {
  test('an empty config starts the shipped keypad env locally, with text actions in the message field', () => {
    const config = OpenEnvEnvConfig.parse({ kind: 'openenv' });
    expect(config.servers).toBeUndefined();
    expect(config).toMatchObject({
      local: { instances: 1, sessions: 4 },
      actions: 'text',
      actionField: 'message',
      successReward: 0.9,
      stepSeconds: 30,
    });
  });

  test('servers already running and an app to start are refused together', () => {
    const parsed = OpenEnvEnvConfig.safeParse({
      kind: 'openenv',
      servers: [{ url: 'http://127.0.0.1:8000' }],
      local: { appDir: '/srv/app', app: 'app:app' },
    });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0].message).toMatch(/either servers already running/);
  });

  test('a local app needs its folder and its module:attribute', () => {
    expect(OpenEnvEnvConfig.safeParse({ kind: 'openenv', local: { appDir: '/srv/app' } }).error?.issues[0].message).toMatch(
      /needs both appDir/,
    );
    expect(OpenEnvEnvConfig.safeParse({ kind: 'openenv', local: { appDir: '/srv/app', app: 'not an app' } }).success).toBe(false);
  });

  test('a server URL must be http(s), and its sessions default to one', () => {
    expect(OpenEnvEnvConfig.safeParse({ kind: 'openenv', servers: [{ url: 'ftp://host' }] }).success).toBe(false);
    expect(OpenEnvEnvConfig.parse({ kind: 'openenv', servers: [{ url: 'https://env.example:8000' }] }).servers).toEqual([
      { url: 'https://env.example:8000', sessions: 1 },
    ]);
  });

  test('unknown fields are refused', () => {
    expect(OpenEnvEnvConfig.safeParse({ kind: 'openenv', actionFeld: 'x' }).success).toBe(false);
  });
});

describe('an observation as the policy reads it', () => {
  test('a text, prompt or message field is shown as it is', () => {
    expect(renderObservation({ text: 'Type the PIN.', metadata: {} }, undefined)).toBe('Type the PIN.');
    expect(renderObservation({ prompt: 'Go.', board: [1] }, undefined)).toBe('Go.');
    expect(renderObservation({ message: 'Hi.' }, undefined)).toBe('Hi.');
  });

  test('the configured field wins, and its absence names the field', () => {
    expect(renderObservation({ text: 'a', question: 'b' }, 'question')).toBe('b');
    expect(() => renderObservation({ score: 1 }, 'question')).toThrow(/env.observationField 'question' is missing/);
    expect(() => renderObservation({ question: 3 }, 'question')).toThrow(/is not a string \(number\)/);
  });

  test('anything else is compact JSON without the metadata', () => {
    expect(renderObservation({ board: [[1, 0]], turn: 'x', metadata: { secret: 1 } }, undefined)).toBe('{"board":[[1,0]],"turn":"x"}');
  });

  test("a tool call's outcome reads as its result's text, or its error", () => {
    const result = { content: [{ type: 'text', text: 'click' }], data: 'click', is_error: false };
    expect(renderObservation({ tool_name: 'enter', result, error: null, metadata: {} }, undefined)).toBe('click');
    expect(
      renderObservation(
        { tool_name: 'nope', result: null, error: { error_type: 'tool_not_found', message: "Unknown tool: 'nope'" } },
        undefined,
      ),
    ).toBe("error (tool_not_found): Unknown tool: 'nope'");
    expect(renderObservation({ tool_name: 'add', result: { data: 3 }, error: null }, undefined)).toBe('3');
  });
});

describe('the action a reply becomes', () => {
  const text = { actions: 'text' as const, actionField: 'message' };
  const calls = { actions: 'tools' as const, actionField: 'message' };

  test('text: the reply in the action field', () => {
    expect(openEnvAction('4821', text, [])).toEqual({ message: '4821' });
    expect(openEnvAction('go', { ...text, actionField: 'command' }, [])).toEqual({ command: 'go' });
  });

  test("tools: the runtime's tool call as openenv's call_tool action", () => {
    expect(openEnvAction('{"tool":"enter","arguments":{"code":"4821"}}', calls, tools)).toEqual({
      type: 'call_tool',
      tool_name: 'enter',
      arguments: { code: '4821' },
    });
    expect(openEnvAction('{"tool":"look"}', calls, tools)).toEqual({ type: 'call_tool', tool_name: 'look', arguments: {} });
  });

  test('tools: a reply in text, an unknown tool or arguments that are not an object are told to the policy', () => {
    expect(openEnvAction('I would type 1234', calls, tools)).toBe(
      'Act by calling one of the tools (look, enter); a reply in text does nothing here.',
    );
    expect(openEnvAction('{"tool":"force","arguments":{}}', calls, tools)).toBe("There is no tool 'force'; the tools are: look, enter.");
    expect(openEnvAction('{"tool":"enter","arguments":"4821"}', calls, tools)).toMatch(/must be a JSON object/);
  });

  test('a listed tool is offered as an OpenAI function with its input schema', () => {
    expect(toolDefinition(tools[1])).toEqual({
      type: 'function',
      function: { name: 'enter', description: 'Type a code.', parameters: tools[1].input_schema },
    });
  });
});

describe('the task file', () => {
  const write = (content: string) => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'openenv-tasks-')), 'tasks.json');
    writeFileSync(file, content);
    return file;
  };

  test('the shipped keypad tasks: three kinds, each reset by its task id', () => {
    const tasks = loadOpenEnvTasks(KEYPAD_TASKS_FILE);
    expect(new Set(tasks.map((t) => t.kind))).toEqual(new Set(['pin', 'year', 'extension']));
    expect(tasks.every((t) => t.reset.task_id === t.id && t.prompt)).toBe(true);
  });

  test('a bad file names itself and what is wrong', () => {
    expect(() => loadOpenEnvTasks(write('not json'))).toThrow(/cannot read it as JSON/);
    expect(() => loadOpenEnvTasks(write('{"tasks": [{"id": "a"}]}'))).toThrow(/tasks\.0\.kind/);
    expect(() => loadOpenEnvTasks(write('{"tasks": [{"id": "a", "kind": "k"}, {"id": "a", "kind": "k"}]}'))).toThrow(
      /task id 'a' appears twice/,
    );
  });
});

describe('session slots over servers', () => {
  const servers = () => [
    { address: { url: 'http://a' }, sessions: 2, inUse: 0 },
    { address: { url: 'http://b' }, sessions: 1, inUse: 0 },
  ];

  test('episodes are spread over the servers, the least busy first', async () => {
    const slots = new SessionSlots(servers());
    const taken = [await slots.acquire(), await slots.acquire(), await slots.acquire()];
    expect(taken.map((s) => (s.address as { url: string }).url).sort()).toEqual(['http://a', 'http://a', 'http://b']);
  });

  test('when every server is full an episode waits for a slot, and gets the one given back', async () => {
    const slots = new SessionSlots(servers());
    const taken = [await slots.acquire(), await slots.acquire(), await slots.acquire()];
    let waited = false;
    const next = slots.acquire().then((slot) => {
      waited = true;
      return slot;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(waited).toBe(false);
    const freed = taken.find((s) => (s.address as { url: string }).url === 'http://b')!;
    void freed.release();
    void freed.release();
    expect(((await next).address as { url: string }).url).toBe('http://b');
  });

  test('a waiting episode that is cancelled stops waiting', async () => {
    const slots = new SessionSlots([{ address: { url: 'http://a' }, sessions: 1, inUse: 0 }]);
    await slots.acquire();
    const abort = new AbortController();
    const waiting = slots.acquire(abort.signal);
    abort.abort();
    await expect(waiting).rejects.toThrow();
  });
});
