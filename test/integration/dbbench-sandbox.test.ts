/**
 * DBBench against the real MySQL-compatible server ($DBBENCH_MYSQL_URL or the
 * local MariaDB as root): the gold replay of the dev split, the sandbox's
 * refusals, teardown, and the sweeper.
 */
import type { Connection as CoreConnection } from 'mysql2';
import { DbBenchEnvironment } from '../../core/envs/dbbench/environment';
import { replayDbBench } from '../../core/envs/dbbench/replay';
import { SandboxHost, type Sandbox } from '../../core/envs/dbbench/sandbox';
import { loadDbBenchTasks, type DbBenchTask } from '../../core/envs/dbbench/tasks';
import { DBBENCH_TEST_URL, DEV_SPLIT, databaseExists, makeLeftover, userExists, waitForNoSessions } from './dbbench-helpers';

const PREFIX = 'hsdbbit_';
const STATEMENT_TIME_MS = 1000;

let host: SandboxHost;
let tasks: DbBenchTask[];

beforeAll(() => {
  host = new SandboxHost({ adminUrl: DBBENCH_TEST_URL, prefix: PREFIX, limits: { statementTimeMs: STATEMENT_TIME_MS } });
  tasks = loadDbBenchTasks(DEV_SPLIT);
});

afterAll(async () => {
  await host.sweep({ olderThanMs: -1 });
  await host.close();
});

const quote = (name: string) => `\`${name.replace(/`/g, '``')}\``;

describe('replaying the dev split with a gold agent', () => {
  test('all 60 tasks pass through the real environment, at concurrency 1 and 8', async () => {
    for (const concurrency of [1, 8]) {
      const report = await replayDbBench({ file: DEV_SPLIT, concurrency, adminUrl: DBBENCH_TEST_URL, sandbox: { prefix: PREFIX } });
      expect(report.failures).toEqual([]);
      expect(report).toMatchObject({ total: 60, passed: 60 });
      expect(report.byType.INSERT).toEqual({ total: 20, passed: 20 });
      expect(report.byType.UPDATE).toEqual({ total: 20, passed: 20 });
      console.log(`DBBench gold replay, concurrency ${concurrency}: ${report.episodesPerSecond.toFixed(1)} episodes/s`);
    }
  });
});

describe('the sandbox refuses escapes', () => {
  let mine: Sandbox;
  let other: Sandbox;
  let table: string;

  beforeAll(async () => {
    mine = await host.open(tasks[0].entry.table);
    other = await host.open(tasks[20].entry.table);
    table = quote(tasks[0].entry.table.table_name);
  });

  afterAll(async () => {
    await mine.drop();
    await other.drop();
  });

  test('the episode can use its own table', async () => {
    const result = await mine.execute(`SELECT Representative FROM ${table} LIMIT 2`);
    expect(result.observation).toBe("[('Dabney H. Maury',), ('Luther F. McKinney',)]");
  });

  test('the server accounts cannot be read', async () => {
    const result = await mine.execute('SELECT * FROM mysql.user');
    expect(result.outcome).toBe('error');
    expect(result.observation).toMatch(/^1142 \(42000\): SELECT command denied to user/);
  });

  test("another episode's database cannot be read", async () => {
    const result = await mine.execute(`SELECT * FROM ${quote(other.database)}.${quote(tasks[20].entry.table.table_name)}`);
    expect(result.outcome).toBe('error');
    expect(result.observation).toMatch(/command denied/);
  });

  test('only its own database is visible', async () => {
    const result = await mine.execute('SHOW DATABASES');
    const visible = [`('information_schema',)`, `('${mine.database}',)`];
    expect([`[${visible.join(', ')}]`, `[${[...visible].reverse().join(', ')}]`]).toContain(result.observation);
  });

  test('it cannot create a database beside its own, even one its name pattern would match', async () => {
    const lookalike = mine.database.replace(/_/g, 'X');
    const result = await mine.execute(`CREATE DATABASE ${quote(lookalike)}`);
    expect(result.outcome).toBe('error');
    expect(await databaseExists(host.admin, lookalike)).toBe(false);
  });

  test('it cannot create users', async () => {
    const result = await mine.execute("CREATE USER 'intruder'@'%' IDENTIFIED BY 'x'");
    expect(result.observation).toMatch(/^1227 \(42000\): Access denied/);
    expect(await userExists(host.admin, 'intruder')).toBe(false);
  });

  test('it cannot change grants', async () => {
    expect((await mine.execute(`GRANT SELECT ON ${quote(mine.database)}.* TO '${other.name}'@'%'`)).outcome).toBe('error');
    expect((await mine.execute(`GRANT ALL PRIVILEGES ON *.* TO '${mine.name}'@'%'`)).outcome).toBe('error');
  });

  test('it cannot change server settings', async () => {
    const result = await mine.execute('SET GLOBAL max_connections = 1');
    expect(result.observation).toMatch(/^1227 \(42000\): Access denied/);
  });

  test('it cannot read or write files', async () => {
    expect((await mine.execute(`LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE ${table}`)).outcome).toBe('error');
    expect((await mine.execute(`LOAD DATA INFILE '/etc/passwd' INTO TABLE ${table}`)).outcome).toBe('error');
    expect((await mine.execute(`SELECT 1 INTO OUTFILE '/tmp/${mine.name}.txt'`)).outcome).toBe('error');
  });

  test('SELECT SLEEP(100) is stopped by the statement time limit', async () => {
    const result = await mine.execute('SELECT SLEEP(100)');
    expect(result.outcome).toBe('error');
    expect(result.observation).toMatch(/max_statement_time exceeded|maximum statement execution time exceeded/);
    expect(result.elapsedMs).toBeLessThan(STATEMENT_TIME_MS + 1500);
  });

  test('lifting the limit inside the statement does not help: the watchdog ends it', async () => {
    const flavor = await host.serverFlavor();
    const sql =
      flavor === 'mariadb' ? 'SET STATEMENT max_statement_time = 0 FOR SELECT SLEEP(100)' : `UPDATE ${table} SET Title = SLEEP(100)`;
    const result = await mine.execute(sql);
    expect(result.error?.limit).toBe('time');
    expect(result.elapsedMs).toBeLessThan(STATEMENT_TIME_MS + 2500);
  });

  test('changing its own password does not lock the episode out', async () => {
    expect((await mine.execute("SET PASSWORD = PASSWORD('changed')")).outcome).toBe('empty');
    expect((await mine.execute('SELECT 1')).observation).toBe('[(1,)]');
  });

  test('the episode user cannot open more connections than allowed', async () => {
    const open: CoreConnection[] = [];
    await waitForNoSessions(host.admin, mine.name);
    try {
      for (let n = 0; n < host.limits.maxUserConnections; n++) open.push(await mine.connectAsEpisodeUser());
      await expect(mine.connectAsEpisodeUser()).rejects.toMatchObject({ errno: 1226 });
    } finally {
      for (const connection of open) connection.destroy();
    }
  });

  test('a huge result is fetched only as far as its 800-character observation needs', async () => {
    const huge = `SELECT a.Representative, b.Title FROM ${table} a, ${table} b, ${table} c, ${table} d`;
    const result = await mine.execute(huge);
    expect(result.stoppedEarly).toBe(true);
    expect(result.rowsFetched).toBeLessThan(100);
    expect(result.elapsedMs).toBeLessThan(STATEMENT_TIME_MS);
    expect(result.observation).toHaveLength(811);
    expect(result.observation.endsWith('[TRUNCATED]')).toBe(true);
    // The same text AgentBench prints after fetching everything.
    expect((await mine.execute(`${huge} LIMIT 300`)).observation).toBe(result.observation);
  });
});

describe('episodes', () => {
  let env: DbBenchEnvironment;

  beforeAll(() => {
    env = new DbBenchEnvironment({ tasks, host });
  });

  test('the instruction is the description and the table description', async () => {
    const episode = await env.startEpisode('dbbench-000', { maxTurns: 16 });
    try {
      expect(episode.instruction()).toBe(`${tasks[0].entry.description}\n${tasks[0].entry.add_description}`);
    } finally {
      await episode.close();
    }
  });

  test('a SQL error reads as in AgentBench, whose database is named after the table', async () => {
    const episode = await env.startEpisode('dbbench-000', { maxTurns: 16 });
    try {
      const outcome = await episode.step('Action: Operation\n```sql\nSELECT * FROM nosuch\n```');
      expect(outcome).toMatchObject({ done: false, kind: 'error' });
      expect(outcome.observation).toBe("1146 (42S02): Table 'US Ambassadors and Envoy Extraordinary to Colombia.nosuch' doesn't exist");
    } finally {
      await episode.close();
    }
  });

  test('a statement without rows reads [] ', async () => {
    const episode = await env.startEpisode('dbbench-020', { maxTurns: 16 });
    try {
      const outcome = await episode.step(`Action: Operation\n\`\`\`sql\n${String(tasks[20].entry.label[0])}\n\`\`\``);
      expect(outcome).toMatchObject({ observation: '[]', done: false, kind: 'empty' });
    } finally {
      await episode.close();
    }
  });

  test('a format error ends the episode and drops its sandbox', async () => {
    const episode = await env.startEpisode('dbbench-000', { maxTurns: 16 });
    const name = episode.sandboxName;
    const outcome = await episode.step('I am not sure what to do.');
    expect(outcome).toMatchObject({ done: true, success: false, reward: 0, failureType: 'format_error' });
    expect(await databaseExists(host.admin, name)).toBe(false);
    expect(await userExists(host.admin, name)).toBe(false);
  });

  test('on the last turn only a Final Answer counts, and nothing more is executed', async () => {
    const episode = await env.startEpisode('dbbench-000', { maxTurns: 2 });
    const name = episode.sandboxName;
    const first = await episode.step('Action: Operation\n```sql\nSELECT 1\n```');
    expect(first).toMatchObject({ observation: '[(1,)]', done: false });
    const last = await episode.step('Action: Operation\n```sql\nSELECT 2\n```');
    expect(last).toMatchObject({ done: true, success: false, failureType: 'turn_limit' });
    expect(await databaseExists(host.admin, name)).toBe(false);
  });

  test('closing an episode midway drops its sandbox', async () => {
    const episode = await env.startEpisode('dbbench-020', { maxTurns: 16 });
    const name = episode.sandboxName;
    await episode.close();
    await episode.close();
    expect(await databaseExists(host.admin, name)).toBe(false);
    expect(await userExists(host.admin, name)).toBe(false);
  });

  test('a task whose table the server refuses runs without it, as in AgentBench', async () => {
    const episode = await env.startEpisode('dbbench-005', { maxTurns: 16 });
    try {
      const outcome = await episode.step('Action: Operation\n```sql\nSELECT COUNT(*) FROM historic_sites\n```');
      expect(outcome.observation).toBe("1146 (42S02): Table 'historic_sites.historic_sites' doesn't exist");
    } finally {
      await episode.close();
    }
  });
});

describe('sweeping leftovers', () => {
  test('sandboxes older than the bound are removed, fresh ones kept', async () => {
    const hour = 3_600_000;
    const leftover = await makeLeftover(host.admin, PREFIX, Date.now() - 3 * hour);
    const fresh = await host.open(tasks[0].entry.table);
    try {
      const report = await host.sweep({ olderThanMs: hour });
      expect(report.databases).toContain(leftover);
      expect(report.users).toContain(leftover);
      expect(await databaseExists(host.admin, leftover)).toBe(false);
      expect(await userExists(host.admin, leftover)).toBe(false);
      expect(await databaseExists(host.admin, fresh.database)).toBe(true);
      expect(await userExists(host.admin, fresh.name)).toBe(true);
      expect(report.databases).not.toContain(fresh.database);
    } finally {
      await fresh.drop();
    }
  });
});
