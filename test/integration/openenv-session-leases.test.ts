/**
 * A remote OpenEnv server's sessions counted in the run store for every
 * host: hosts (each a worker's env cache with a lease holder and a database
 * pool of its own) running episodes at once against one server never hold
 * more sessions than it takes, as the server sees it through a counting
 * proxy; a lease is renewed while its episode runs; a host that dies frees
 * its slots when its leases expire; a cancelled wait holds nothing.
 * The server is the shipped keypad env (openenv 0.10, `openenv setup`),
 * served by hand with room for more sessions than the config gives it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { parseRunConfig, type RunConfigInput } from '../../core/config';
import type { Environment } from '../../core/harness/environment';
import { serverKey } from '../../core/envs/session-leases';
import { KEYPAD_DIR } from '../../core/envs/openenv/install-location';
import { RunStore } from '../../core/store/run-store';
import { setupOpenEnv } from '../../infra/openenv/install';
import { EnvironmentCache } from '../../workers/worker';
import { startConnectionCountingProxy, type ConnectionCountingProxy } from './connection-counting-proxy';
import { TEST_DATABASE_URL } from './env';

/** Sessions the keypad server itself takes: more than any config below gives it, so only our count keeps to the limit. */
const SERVER_MAX_SESSIONS = 16;
/** What the keypad env scores as fully right. */
const DIGITS = '4821';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let keypad: { port: number; child: ChildProcess };
let proxy: ConnectionCountingProxy;
const hosts: Host[] = [];
let store: RunStore;

interface Host {
  holder: string;
  environments: EnvironmentCache;
  store: RunStore;
  env(url: string, sessions: number): Environment;
}

/** A host as a worker process has it: its own database pool and env cache, holding leases under its own name. */
function startHost(holder: string, leaseMs: number): Host {
  const own = RunStore.connect(TEST_DATABASE_URL);
  const environments = new EnvironmentCache({ sessionLeases: { leases: own.sessionLeases, holder, leaseMs } });
  const host: Host = {
    holder,
    environments,
    store: own,
    env: (url, sessions) => environments.get(parseRunConfig({ env: { kind: 'openenv', servers: [{ url, sessions }] } } as RunConfigInput)),
  };
  hosts.push(host);
  return host;
}

/** One episode: reset, `holdMs` of thinking, the right digits; resolves with the server's reward. */
async function play(env: Environment, taskId: string, holdMs: number, signal?: AbortSignal): Promise<number | undefined> {
  const episode = await env.startEpisode(taskId, { maxTurns: 1, signal });
  try {
    await sleep(holdMs);
    const outcome = await episode.step(DIGITS);
    return outcome.done ? outcome.reward : undefined;
  } finally {
    await episode.close();
  }
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
  const { python } = await setupOpenEnv();
  const port = await freePort();
  const child = spawn(
    python,
    ['-m', 'uvicorn', 'keypad_env:app', '--host', '127.0.0.1', '--port', String(port), '--log-level', 'warning'],
    {
      cwd: KEYPAD_DIR,
      env: { ...process.env, OPENENV_MAX_SESSIONS: String(SERVER_MAX_SESSIONS) },
      stdio: 'ignore',
    },
  );
  keypad = { port, child };
  for (
    let i = 0;
    i < 200 &&
    !(await fetch(`http://127.0.0.1:${port}/health`).then(
      (r) => r.ok,
      () => false,
    ));
    i++
  )
    await sleep(100);
  store = RunStore.connect(TEST_DATABASE_URL);
}, 600_000);

afterAll(async () => {
  keypad?.child.kill();
  await Promise.all(
    hosts.map(async (h) => {
      await h.environments.closeAll();
      await h.store.close();
    }),
  );
  await store?.close();
});

// A proxy of its own for each test: its URL is a server the leases have never seen.
beforeEach(async () => {
  proxy = await startConnectionCountingProxy({ host: '127.0.0.1', port: keypad.port });
});
afterEach(async () => {
  await proxy.close();
});

test('two hosts running episodes at once never hold more sessions than the server takes, and every episode ends', async () => {
  const sessions = 2;
  const [a, b] = [startHost('host-a', 5_000), startHost('host-b', 5_000)];
  const tasks = a.env(proxy.url, sessions).listTasks().slice(0, 6);
  const rewards = await Promise.all([a, b].flatMap((host) => tasks.map((task) => play(host.env(proxy.url, sessions), task.taskId, 150))));
  expect(rewards).toEqual(Array(12).fill(1));
  expect(proxy.connections).toHaveLength(12);
  expect(proxy.peak()).toBeLessThanOrEqual(sessions);
  expect(await store.sessionLeases.live(serverKey(proxy.url))).toEqual([]);
});

test('an episode longer than its lease keeps its slot: the lease is renewed while the episode runs', async () => {
  const leaseMs = 1_200;
  const [a, b] = [startHost('host-a', leaseMs), startHost('host-b', leaseMs)];
  const long = a.env(proxy.url, 1).startEpisode('pin-000', { maxTurns: 1 });
  const first = await long;
  const other = play(b.env(proxy.url, 1), 'pin-001', 0);
  await sleep(3 * leaseMs);
  // Host b is still waiting: the only slot stayed host a's past three lease times.
  expect(proxy.connections).toHaveLength(1);
  expect((await store.sessionLeases.live(serverKey(proxy.url))).map((l) => l.holder)).toEqual(['host-a']);
  expect(await first.step(DIGITS)).toMatchObject({ done: true, reward: 1 });
  await first.close();
  expect(await other).toBe(1);
  expect(proxy.peak()).toBe(1);
  const [held, next] = proxy.connections;
  expect(next.openedAt).toBeGreaterThanOrEqual(held.closedAt!);
});

test('a host that dies holding slots frees them when its leases expire, and another host then runs its episodes', async () => {
  const sessions = 2;
  const leaseMs = 3_000;
  const dying = spawn(
    process.execPath,
    // tsx as a loader, not its CLI: the CLI runs the script in a child that SIGKILL would not reach.
    [
      '--import',
      'tsx',
      path.join(__dirname, 'fixtures/openenv-dying-host.ts'),
      TEST_DATABASE_URL,
      proxy.url,
      String(sessions),
      String(leaseMs),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const holder = await new Promise<string>((resolve, reject) => {
    let out = '';
    dying.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) resolve((JSON.parse(out.split('\n')[0]) as { holder: string }).holder);
    });
    dying.once('exit', (code) => reject(new Error(`the dying host exited (${code}) before holding its slots`)));
  });
  const held = await store.sessionLeases.live(serverKey(proxy.url));
  expect(held.map((l) => [l.slot, l.holder])).toEqual([
    [0, holder],
    [1, holder],
  ]);
  const expiry = Math.min(...held.map((l) => l.expiresAt.getTime()));
  const exited = new Promise((resolve) => dying.once('exit', resolve));
  dying.kill('SIGKILL');
  await exited;

  const survivor = startHost('host-survivor', leaseMs);
  const env = survivor.env(proxy.url, sessions);
  const rewards = await Promise.all(
    env
      .listTasks()
      .slice(0, 3)
      .map((task) => play(env, task.taskId, 0)),
  );
  expect(rewards).toEqual([1, 1, 1]);
  const survivors = proxy.connections.slice(sessions);
  expect(survivors).toHaveLength(3);
  // No session of the survivor opened while the dead host's leases were live (one clock: this machine's).
  expect(Math.min(...survivors.map((c) => c.openedAt))).toBeGreaterThanOrEqual(expiry);
  expect(proxy.peak()).toBeLessThanOrEqual(sessions);
}, 60_000);

test('an episode that is cancelled while it waits for a slot stops waiting, and holds no slot', async () => {
  const [a, b] = [startHost('host-a', 5_000), startHost('host-b', 5_000)];
  const first = await a.env(proxy.url, 1).startEpisode('pin-000', { maxTurns: 1 });
  const abort = new AbortController();
  const waiting = b.env(proxy.url, 1).startEpisode('pin-001', { maxTurns: 1, signal: abort.signal });
  await sleep(300);
  abort.abort();
  await expect(waiting).rejects.toThrow(/aborted/i);
  await first.step(DIGITS);
  await first.close();
  expect(await store.sessionLeases.live(serverKey(proxy.url))).toEqual([]);
  expect(await play(b.env(proxy.url, 1), 'pin-002', 0)).toBe(1);
  expect(proxy.connections).toHaveLength(2);
});

test("hosts asking for a server's slots at once never lease one slot twice", async () => {
  const server = serverKey(proxy.url);
  const [a, b] = [startHost('host-a', 5_000), startHost('host-b', 5_000)];
  const asks = Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b)).map((host) =>
    host.store.sessionLeases.take([{ server, sessions: 5 }], host.holder, 5_000),
  );
  const taken = (await Promise.all(asks)).filter((lease) => lease !== null);
  expect(new Set(taken.map((l) => l.slot)).size).toBe(taken.length);
  expect(taken.length).toBeLessThanOrEqual(5);
  // Asked one at a time, the rest of the slots are taken, and then none is left.
  for (let i = taken.length; i < 5; i++)
    expect(await a.store.sessionLeases.take([{ server, sessions: 5 }], 'host-a', 5_000)).not.toBeNull();
  expect(await b.store.sessionLeases.take([{ server, sessions: 5 }], 'host-b', 5_000)).toBeNull();
  expect((await store.sessionLeases.live(server)).map((l) => l.slot)).toEqual([0, 1, 2, 3, 4]);
});
