/**
 * The agent's code as an adversary, played through the AppWorld env's
 * Episode API against the real AppWorld server, each outcome checked from
 * the host: no connection reaches a host listener, the ground truth cannot
 * be read (and a guess scores 0), memory, processes, output and time are
 * bounded, nothing of the sandbox outlives its episode, and nothing of one
 * episode reaches the next. The control: the gold solution still scores 1.
 */
import { statfsSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import os from 'node:os';
import { AppWorldEnvironment, type AppWorldEpisode } from '../../core/envs/appworld/environment';
import { processesOfUid, SANDBOX_ROOT } from '../../core/envs/appworld/sandbox';
import { SOCKET_DIR } from '../../core/envs/appworld/servers';
import { sizedFolderSupport } from '../../core/envs/sized-folder';
import type { StepOutcome } from '../../core/harness/environment';
import { loadFixtureTasks, setupAppWorld } from '../../infra/appworld/install';

const tasks = loadFixtureTasks();
const qa = tasks.find((t) => t.id === 'fixqa_2')!;
const EXECUTE_SECONDS = 5;
const MAX_PROCESSES = 64;
const MAX_MEMORY = 3 * 1024 ** 3;
const REPLY_BYTES = 1024 * 1024;

/** How the agent's code gets a module AppWorld's guard refuses by name (__builtins__ is a dict or the module, as the interpreter has it). */
const sneak = (name: string) =>
  `(__builtins__ if type(__builtins__) is dict else vars(__builtins__))['__import__'](${name
    .split('')
    .map((c) => `'${c}'`)
    .join('+')})`;
const fence = (code: string) => `\`\`\`python\n${code}\n\`\`\``;

let env: AppWorldEnvironment;

type AppWorldLimitsInput = NonNullable<ConstructorParameters<typeof AppWorldEnvironment>[0]['limits']>;

/** An AppWorld env on the fixture world with these sandbox limits. */
async function fixtureEnv(limits: AppWorldLimitsInput, servers = 1): Promise<AppWorldEnvironment> {
  const install = await setupAppWorld();
  return new AppWorldEnvironment({
    appworld: install.appworld,
    root: install.fixtureRoot,
    cache: install.cache,
    dataset: 'fixture',
    servers,
    harnesses: [],
    limits,
  });
}

beforeAll(async () => {
  env = await fixtureEnv(
    { executeSeconds: EXECUTE_SECONDS, maxProcesses: MAX_PROCESSES, maxMemoryBytes: MAX_MEMORY, replyBytes: REPLY_BYTES },
    2,
  );
}, 600_000);
afterAll(async () => {
  await env?.close();
});

/** One episode of `taskId`: each code is one turn, until the episode ends; the episode is closed after. */
async function play(
  taskId: string,
  codes: string[],
  during?: (episode: AppWorldEpisode, turn: number) => void,
  on: AppWorldEnvironment = env,
): Promise<{ outcomes: StepOutcome[]; episode: AppWorldEpisode }> {
  const episode = await on.startEpisode(taskId, { maxTurns: codes.length });
  const outcomes: StepOutcome[] = [];
  try {
    for (const [turn, code] of codes.entries()) {
      const outcome = await episode.step(fence(code));
      outcomes.push(outcome);
      during?.(episode, turn);
      if (outcome.done) break;
    }
  } finally {
    await episode.close();
  }
  return { outcomes, episode };
}

/** The sandbox's processes as the host sees them, once they had `ms` to go. */
async function leftAfter(uid: number, ms = 5000): Promise<number[]> {
  const deadline = Date.now() + ms;
  let left = processesOfUid(uid);
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    left = processesOfUid(uid);
  }
  return left;
}

test('control: the gold solution of a question task still scores 1', async () => {
  const { outcomes } = await play(qa.id, qa.solution);
  expect(outcomes.at(-1)).toMatchObject({ done: true, success: true, reward: 1 });
}, 300_000);

test("a socket smuggled past AppWorld's import check reaches nothing on the host: the host's listener sees no connection", async () => {
  const connections: Socket[] = [];
  const listener: Server = createServer((socket) => {
    connections.push(socket);
    socket.destroy();
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  const { port } = listener.address() as { port: number };
  try {
    const { outcomes } = await play(qa.id, [
      [
        `socket = ${sneak('socket')}`,
        'try:',
        `    socket.create_connection(('127.0.0.1', ${port}), timeout=3)`,
        "    print('connected')",
        'except Exception as e:',
        "    print('no connection:', type(e).__name__)",
      ].join('\n'),
    ]);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(connections).toHaveLength(0);
    expect(outcomes[0].observation).toMatch(/^no connection: /);
  } finally {
    await new Promise((resolve) => listener.close(resolve));
  }
}, 300_000);

test('the ground truth read through ctypes (libc open/read) gives nothing, and completing with what was read scores 0', async () => {
  const read = [
    `ctypes = ${sneak('ctypes')}`,
    'libc = ctypes.CDLL(None)',
    'found = {}',
    "for name in ['answer.json', 'private_data.json', 'evaluation.py']:",
    `    fd = libc.open(('data/tasks/${qa.id}/ground_truth/' + name).encode(), 0)`,
    '    buf = ctypes.create_string_buffer(65536)',
    '    n = libc.read(fd, buf, 65536) if fd >= 0 else -1',
    "    found[name] = buf.raw[:n].decode() if n > 0 else ''",
    'print({name: len(text) for name, text in found.items()})',
  ].join('\n');
  const answer = [
    'try:',
    "    guess = json.loads(found['answer.json'])",
    'except Exception:',
    "    guess = ''",
    'apis.supervisor.complete_task(answer=guess)',
  ].join('\n');
  const { outcomes } = await play(qa.id, [read, answer]);
  expect(outcomes[0].observation).toMatch(/\{"answer\.json": 0, "private_data\.json": 0, "evaluation\.py": 0\}/);
  expect(outcomes.at(-1)).toMatchObject({ done: true, success: false, reward: 0, failureType: 'wrong_answer' });
}, 300_000);

test('a memory bomb stops at the address-space limit (MemoryError), and the episode goes on', async () => {
  const bomb = [
    'chunks = []',
    'try:',
    '    for _ in range(60):',
    '        chunks.append(bytes(100 * 2**20))',
    "    print('allocated', len(chunks))",
    'except MemoryError:',
    "    print('MemoryError after', len(chunks))",
    'chunks = None',
  ].join('\n');
  const { outcomes } = await play(qa.id, [bomb, "print('still here')"]);
  const got = /MemoryError after (\d+)/.exec(outcomes[0].observation);
  expect(got).not.toBeNull();
  expect(Number(got![1]) * 100 * 2 ** 20).toBeLessThan(MAX_MEMORY);
  expect(outcomes[1]).toMatchObject({ observation: 'still here\n', done: false });
}, 300_000);

test('a fork bomb stops at the process limit, and none of its processes outlives the episode', async () => {
  const bomb = [
    // posix and select: AppWorld's guard knows os.fork, os._exit and time.sleep by name only.
    `posix = ${sneak('posix')}`,
    `select = ${sneak('select')}`,
    'made = 0',
    'try:',
    '    for _ in range(200):',
    '        if posix.fork() == 0:',
    '            select.select([], [], [], 600)',
    '            posix._exit(0)',
    '        made += 1',
    "    print('forked', made)",
    'except OSError as e:',
    "    print('fork refused after', made, type(e).__name__)",
  ].join('\n');
  let during: number[] = [];
  const { outcomes, episode } = await play(qa.id, [bomb], (ep) => (during = processesOfUid(ep.sandboxUid!)));
  const got = /fork refused after (\d+)/.exec(outcomes[0].observation);
  expect(got).not.toBeNull();
  expect(Number(got![1])).toBeLessThan(MAX_PROCESSES);
  expect(during.length).toBeGreaterThan(0);
  expect(during.length).toBeLessThanOrEqual(MAX_PROCESSES);
  expect(await leftAfter(episode.sandboxUid!)).toEqual([]);
}, 300_000);

/**
 * A print of 128 MiB: an env of its own with 60 s to run the code. The episode took 12 s on a quiet machine and
 * ran past the 5 s limit of the other tests in a loaded CI run; the cut, not the clock, is what this test is about.
 */
describe('a huge print', () => {
  let roomy: AppWorldEnvironment;
  beforeAll(async () => {
    roomy = await fixtureEnv({ executeSeconds: 60, maxProcesses: MAX_PROCESSES, maxMemoryBytes: MAX_MEMORY, replyBytes: REPLY_BYTES });
  }, 600_000);
  afterAll(async () => {
    await roomy?.close();
  });

  test('is cut while it streams: the worker reads about the cap, its memory stays bounded, and the episode goes on', async () => {
    let peak = process.memoryUsage().rss;
    const before = peak;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10);
    let outcomes: StepOutcome[];
    try {
      ({ outcomes } = await play(qa.id, ["print('x' * (128 * 2**20))", "print('after')"], undefined, roomy));
    } finally {
      clearInterval(sampler);
    }
    expect(outcomes[0].observation).toMatch(
      new RegExp(`^x{1000}[\\s\\S]*\\[output cut: the reply was over ${REPLY_BYTES} bytes, and reading stopped there\\]$`),
    );
    expect(peak - before).toBeLessThan(64 * 1024 ** 2);
    expect(outcomes[1]).toMatchObject({ observation: 'after\n', done: false });
  }, 300_000);
});

test("an endless loop that switches off AppWorld's own timeout is killed at the wall-clock limit: a clear failure, nothing left running", async () => {
  const loop = [
    `signal = ${sneak('signal')}`,
    `posix = ${sneak('posix')}`,
    'signal.signal(signal.SIGALRM, signal.SIG_IGN)',
    '# a child too, which would outlive a server killed alone',
    'if posix.fork() == 0:',
    '    while True:',
    '        pass',
    'while True:',
    '    pass',
  ].join('\n');
  const started = Date.now();
  const { outcomes, episode } = await play(qa.id, [loop, "print('never')"]);
  const seconds = (Date.now() - started) / 1000;
  expect(outcomes).toHaveLength(1);
  expect(outcomes[0]).toMatchObject({ done: true, success: false, reward: 0, failureType: 'execution_error' });
  expect(outcomes[0].observation).toMatch(new RegExp(`ran past the ${EXECUTE_SECONDS} s limit; the sandbox was killed`));
  expect(seconds).toBeLessThan(EXECUTE_SECONDS + 30);
  expect(await leftAfter(episode.sandboxUid!)).toEqual([]);
}, 300_000);

test('nothing of one episode reaches the next: each gets a clean interpreter', async () => {
  await play(qa.id, [`${sneak('builtins')}.planted = 'from an earlier episode'\nprint('planted')`]);
  const { outcomes } = await play(qa.id, [`print(getattr(${sneak('builtins')}, 'planted', 'clean'))`]);
  expect(outcomes[0].observation).toBe('clean\n');
}, 300_000);

test("the server's socket cannot be swapped for a link (the worker would send this episode's code elsewhere): the next turn still runs on the episode's own server", async () => {
  const swap = [
    `posix = ${sneak('posix')}`,
    'try:',
    `    posix.unlink('${SOCKET_DIR}/server.sock')`,
    `    posix.symlink('/tmp/elsewhere.sock', '${SOCKET_DIR}/server.sock')`,
    "    print('swapped')",
    'except OSError as err:',
    "    print('refused', err.errno)",
  ].join('\n');
  const { outcomes } = await play(qa.id, [swap, "print('still-here')"]);
  expect(outcomes[0].observation).toMatch(/refused 13/);
  expect(outcomes[1]).toMatchObject({ kind: 'ok' });
  expect(outcomes[1].observation).toMatch(/still-here/);
}, 300_000);

test('a folder tree deeper than a path may be long, left in the outputs, is removed without ending the worker; the next episode runs', async () => {
  const deep = [
    `posix = ${sneak('posix')}`,
    `base = '${SANDBOX_ROOT}/experiments/outputs/' + posix.listdir('${SANDBOX_ROOT}/experiments/outputs')[0]`,
    'posix.chdir(base)',
    'for _ in range(3000):',
    "    posix.mkdir('d' * 200)",
    "    posix.chdir('d' * 200)",
    "print('deep')",
  ].join('\n');
  const { outcomes } = await play(qa.id, [deep]);
  expect(outcomes[0].observation).toMatch(/deep/);
  await new Promise((resolve) => setTimeout(resolve, 2000)); // the folder is removed once the server is gone
  const { outcomes: next } = await play(qa.id, qa.solution);
  expect(next.at(-1)).toMatchObject({ done: true, success: true, reward: 1 });
}, 300_000);

/**
 * The red team's attack: forked children that each stay far under the
 * per-process limit but together hold more than the sandbox may. The
 * sandbox's memory is its cgroup's to bound (all its processes together);
 * an env of its own gives it a small limit, so the test is quick.
 */
describe('memory per sandbox (a cgroup per sandbox)', () => {
  const SANDBOX_MEMORY = 768 * 1024 ** 2;
  let small: AppWorldEnvironment;
  beforeAll(async () => {
    small = await fixtureEnv({ executeSeconds: 30, sandboxMemoryBytes: SANDBOX_MEMORY });
  }, 600_000);
  afterAll(async () => {
    await small?.close();
  });

  test("four forked children cannot together hold more than the sandbox's memory: the episode ends as an execution error with the limit named", async () => {
    // 4 x 250 MiB, each page touched: 1000 MiB against 768 MiB for the whole sandbox (each child is far under the per-process limit).
    const children = [
      `posix = ${sneak('posix')}`,
      `select = ${sneak('select')}`,
      'pids = []',
      'for i in range(4):',
      '    pid = posix.fork()',
      '    if pid == 0:',
      '        x = bytearray(250 * 2**20)',
      "        x[::4096] = b'x' * len(x[::4096])",
      '        select.select([], [], [], 3)',
      '        posix._exit(0)',
      '    pids.append(pid)',
      'codes = [posix.waitpid(p, 0)[1] for p in pids]',
      "print('all held' if all(c == 0 for c in codes) else 'some were killed')",
    ].join('\n');
    const episode = await small.startEpisode(qa.id, { maxTurns: 2 });
    let outcome: StepOutcome;
    try {
      outcome = await episode.step(fence(children));
    } finally {
      await episode.close();
    }
    expect(outcome.observation).not.toContain('all held');
    expect(outcome.observation).toMatch(/the sandbox's memory limit of 768 MiB was reached/);
    expect(outcome).toMatchObject({ done: true, success: false, reward: 0, failureType: 'execution_error' });
    // The host's view: the sandbox's group never held more than its limit, and nothing of the sandbox is left.
    expect(episode.sandboxPeakMemoryBytes).toBeGreaterThan(0);
    expect(episode.sandboxPeakMemoryBytes!).toBeLessThanOrEqual(SANDBOX_MEMORY);
    expect(await leftAfter(episode.sandboxUid!)).toEqual([]);
  }, 300_000);
});

/** Bytes in use on the host's file system holding `dir`, as statvfs counts them. */
function diskUsed(dir: string): number {
  const s = statfsSync(dir);
  return (s.blocks - s.bfree) * s.bsize;
}

/**
 * The red team's attacks on the disk, through the one folder the agent's
 * code can write (its episode's output folder): files deleted but held open,
 * and a burst of fallocate. An env of its own gives the folder a small size,
 * so the tests are quick; the attacks are far bigger. Other work on this
 * machine moves the host's disk use too: SLACK leaves room for it.
 */
(sizedFolderSupport().ok ? describe : describe.skip)("an episode's output folder is a file system of its size (the worker is root)", () => {
  const OUTPUTS = 256 * 1024 ** 2;
  const SLACK = 256 * 1024 ** 2;
  let sized: AppWorldEnvironment;
  beforeAll(async () => {
    sized = await fixtureEnv({ executeSeconds: 30, outputsBytes: OUTPUTS });
  }, 600_000);
  afterAll(async () => {
    await sized?.close();
  });

  /** One turn of `code` in a fresh episode, the host's disk sampled (every 20 ms) while it runs; after the episode closes, how long its space took to come back. */
  async function attack(code: string) {
    const tmp = os.tmpdir();
    const episode = await sized.startEpisode(qa.id, { maxTurns: 2 });
    const start = diskUsed(tmp);
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, diskUsed(tmp) - start)), 20);
    let outcome: StepOutcome;
    try {
      outcome = await episode.step(fence(code));
      peak = Math.max(peak, diskUsed(tmp) - start);
    } finally {
      clearInterval(sampler);
      await episode.close();
    }
    // The folder goes once the server is gone (asynchronously), and the host's file system counts freed blocks as free once
    // its journal commits them: up to 15 s for the space to come back.
    const deadline = Date.now() + 15_000;
    while (diskUsed(tmp) - start >= SLACK && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    return { outcome, peak, after: diskUsed(tmp) - start };
  }

  const outputsFolder = [
    `posix = ${sneak('posix')}`,
    `base = '${SANDBOX_ROOT}/experiments/outputs/' + posix.listdir('${SANDBOX_ROOT}/experiments/outputs')[0]`,
  ];

  test("files deleted but held open (24 x 250 MiB, 6 GiB) stop at the folder's size with ENOSPC; the host's disk grows by no more than that, and gets it back", async () => {
    const { outcome, peak, after } = await attack(
      [
        ...outputsFolder,
        // Held by the server's interpreter (it lives as long as the episode), never in any listing.
        'held = []',
        'written = 0',
        'refused = None',
        'try:',
        '    for i in range(24):',
        "        name = base + '/held' + str(i)",
        '        fd = posix.open(name, posix.O_WRONLY | posix.O_CREAT, 0o600)',
        '        posix.unlink(name)',
        '        held.append(fd)',
        '        for _ in range(250):',
        '            written += posix.write(fd, bytes(2**20))',
        'except OSError as e:',
        '    refused = e.errno',
        "print('written', written, 'refused', refused)",
        // Let go once the turn is over: AppWorld writes its own logs to the same folder, and a full one fails its reply.
        'for fd in held:',
        '    posix.close(fd)',
      ].join('\n'),
    );
    const got = /written (\d+) refused (\w+)/.exec(outcome.observation);
    expect(got).not.toBeNull();
    expect(got![2]).toBe('28'); // ENOSPC
    expect(Number(got![1])).toBeLessThanOrEqual(OUTPUTS);
    expect(peak).toBeLessThan(OUTPUTS + SLACK);
    expect(after).toBeLessThan(SLACK);
  }, 300_000);

  test("a burst of fallocate (40 x 250 MiB, 10 GB) stops at the folder's size with ENOSPC; the host's disk grows by no more than that", async () => {
    const { outcome, peak, after } = await attack(
      [
        ...outputsFolder,
        'made = 0',
        'refused = None',
        'try:',
        '    for i in range(40):',
        "        fd = posix.open(base + '/burst' + str(i), posix.O_WRONLY | posix.O_CREAT, 0o600)",
        '        try:',
        '            posix.posix_fallocate(fd, 0, 250 * 2**20)',
        '        finally:',
        '            posix.close(fd)',
        '        made += 1',
        'except OSError as e:',
        '    refused = e.errno',
        "print('made', made, 'refused', refused)",
        // Removed once the turn is over: AppWorld writes its own logs to the same folder, and a full one fails its reply.
        'for i in range(made + 1):',
        "    posix.unlink(base + '/burst' + str(i))",
      ].join('\n'),
    );
    const got = /made (\d+) refused (\w+)/.exec(outcome.observation);
    expect(got).not.toBeNull();
    expect(got![2]).toBe('28'); // ENOSPC
    expect(Number(got![1]) * 250 * 2 ** 20).toBeLessThanOrEqual(OUTPUTS);
    expect(peak).toBeLessThan(OUTPUTS + SLACK);
    expect(after).toBeLessThan(SLACK);
  }, 300_000);
});
