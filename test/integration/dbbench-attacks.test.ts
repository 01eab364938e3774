/**
 * DBBench's scoring and caps against an adversarial agent, played through
 * the env (the agent's SQL actions, then its final answer) on the real
 * MariaDB/MySQL server, and checked from the host: the episode ends within
 * its limits, the failure is recorded, and no session, database or user of
 * the episode is left on the server.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import type { RowDataPacket } from 'mysql2/promise';
import { DbBenchEnvironment, type DbBenchEpisodeHandle } from '../../core/envs/dbbench/environment';
import { SandboxHost, type SandboxLimits } from '../../core/envs/dbbench/sandbox';
import type { AdminQueryable } from '../../core/envs/dbbench/sandbox-admin';
import { loadDbBenchTasks, type DbBenchTask } from '../../core/envs/dbbench/tasks';
import { DBBENCH_TEST_URL, DEV_SPLIT, databaseExists, userExists } from './dbbench-helpers';

const PREFIX = 'hsdbbat_';
/** An INSERT task: dev line 21, its table `School Location Table`. */
const DML_TASK = 'dbbench-020';
const LIMITS: Partial<SandboxLimits> = { statementTimeMs: 1000, scoringTimeMs: 2000, maxDatabaseBytes: 32 * 1024 * 1024 };
/** Scoring's limit, its watchdog's grace and the teardown, with room for a loaded machine. */
const EPISODE_END_BOUND_MS = 8000;

let host: SandboxHost;
let env: DbBenchEnvironment;
let tasks: DbBenchTask[];

beforeAll(() => {
  tasks = loadDbBenchTasks(DEV_SPLIT);
  host = new SandboxHost({ adminUrl: DBBENCH_TEST_URL, prefix: PREFIX, limits: LIMITS });
  env = new DbBenchEnvironment({ tasks, host });
});

afterAll(async () => {
  await host.sweep({ olderThanMs: 0 });
  await host.close();
});

const sql = (statement: string) => `Action: Operation\n\`\`\`sql\n${statement}\n\`\`\``;
const FINAL_ANSWER = 'Action: Answer\nFinal Answer: []';
const TABLE = '`School Location Table`';
/** Some attacks use MariaDB's own syntax: SET STATEMENT, sequences, its seq_1_to_N tables. */
const onMariaDb = async () => (await host.serverFlavor()) === 'mariadb';

async function sessionsOf(admin: AdminQueryable, name: string): Promise<string[]> {
  const [rows] = await admin.query<RowDataPacket[]>(
    'SELECT CONCAT(ID, " ", USER, " ", COALESCE(INFO, "")) AS session FROM information_schema.PROCESSLIST WHERE USER = ? OR DB = ?',
    [name, name],
  );
  return rows.map((r) => String(r.session));
}

/** The sessions of a sandbox after a moment for killed ones to leave the process list. */
async function lingeringSessionsOf(name: string): Promise<string[]> {
  const deadline = Date.now() + 2000;
  for (;;) {
    const sessions = await sessionsOf(host.admin, name);
    if (sessions.length === 0 || Date.now() > deadline) return sessions;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** What the host sees of an episode's sandbox once it is over: nothing at all. */
async function expectNothingLeft(name: string): Promise<void> {
  expect(await lingeringSessionsOf(name)).toEqual([]);
  expect(await databaseExists(host.admin, name)).toBe(false);
  expect(await userExists(host.admin, name)).toBe(false);
}

/** Plays the agent's replies until the episode ends; returns the last outcome, how long the end took, and the episode. */
async function play(replies: string[], environment = env) {
  const episode: DbBenchEpisodeHandle = await environment.startEpisode(DML_TASK, { maxTurns: 16 });
  let outcome = await episode.step(replies[0]);
  let lastStepMs = 0;
  for (const reply of replies.slice(1)) {
    if (outcome.done) break;
    const started = Date.now();
    outcome = await episode.step(reply);
    lastStepMs = Date.now() - started;
  }
  return { episode, outcome, lastStepMs };
}

describe('scoring reads only a plain base table, within its time limit', () => {
  test('a view over SLEEP under the table name ends within the limit as a wrong answer, leaving nothing behind', async () => {
    const { episode, outcome, lastStepMs } = await play([
      sql(`DROP TABLE ${TABLE}`),
      sql(
        `CREATE VIEW ${TABLE} AS SELECT SLEEP(100000) AS School, 'a' AS Location, 'b' AS \`Date moved\`, 'c' AS \`Currently at this location\``,
      ),
      FINAL_ANSWER,
    ]);
    expect(outcome).toMatchObject({ done: true, reward: 0, success: false, failureType: 'wrong_answer' });
    expect(lastStepMs).toBeLessThan(EPISODE_END_BOUND_MS);
    expect(episode.result()).toMatchObject({
      correct: false,
      failureType: 'wrong_answer',
      answer: expect.stringMatching(/not hashed: .*VIEW, not a base table/),
    });
    await expectNothingLeft(episode.sandboxName);
  }, 30_000);

  test('a generated column that is slow to read is not read: a wrong answer, at once', async () => {
    const { episode, outcome, lastStepMs } = await play([
      sql(`ALTER TABLE ${TABLE} DROP COLUMN Location`),
      sql(`ALTER TABLE ${TABLE} ADD COLUMN Location TEXT AS (MD5(REPEAT(School, 400000))) VIRTUAL`),
      FINAL_ANSWER,
    ]);
    expect(outcome).toMatchObject({ done: true, reward: 0, failureType: 'wrong_answer' });
    expect(episode.result()?.answer).toMatch(/not hashed: .*generated columns \(Location\)/);
    expect(lastStepMs).toBeLessThan(EPISODE_END_BOUND_MS);
    await expectNothingLeft(episode.sandboxName);
  }, 30_000);

  test('the server itself refuses SLEEP in a generated column', async () => {
    const episode = await env.startEpisode(DML_TASK, { maxTurns: 16 });
    try {
      const outcome = await episode.step(sql(`ALTER TABLE ${TABLE} ADD COLUMN slow TEXT AS (SLEEP(100)) VIRTUAL`));
      expect(outcome.observation).toMatch(/cannot be used in the GENERATED ALWAYS AS clause/);
    } finally {
      await episode.close();
    }
    await expectNothingLeft(episode.sandboxName);
  });

  test('a sequence put under the table name is not read: a wrong answer', async () => {
    if (!(await onMariaDb())) return;
    const { episode, outcome } = await play([sql(`DROP TABLE ${TABLE}`), sql(`CREATE SEQUENCE ${TABLE}`), FINAL_ANSWER]);
    expect(outcome).toMatchObject({ done: true, reward: 0, failureType: 'wrong_answer' });
    expect(episode.result()?.answer).toMatch(/not hashed: .*SEQUENCE, not a base table/);
    await expectNothingLeft(episode.sandboxName);
  }, 30_000);

  test('a base table too big to hash within the scoring limit is a wrong answer, its hash stopped at the limit', async () => {
    const slowHost = new SandboxHost({
      adminUrl: DBBENCH_TEST_URL,
      prefix: PREFIX,
      limits: { ...LIMITS, scoringTimeMs: 50, maxDatabaseBytes: 256 * 1024 * 1024 },
    });
    const slowEnv = new DbBenchEnvironment({ tasks, host: slowHost });
    try {
      const grow = sql(`INSERT INTO ${TABLE} SELECT * FROM ${TABLE}`);
      const { episode, outcome, lastStepMs } = await play([...Array(14).fill(grow), FINAL_ANSWER], slowEnv);
      expect(outcome).toMatchObject({ done: true, reward: 0, failureType: 'wrong_answer' });
      expect(episode.result()?.answer).toMatch(/not hashed: the table's hash did not finish within the scoring limit/);
      expect(lastStepMs).toBeLessThan(EPISODE_END_BOUND_MS);
      await expectNothingLeft(episode.sandboxName);
    } finally {
      await slowHost.close();
    }
  }, 120_000);

  test('the agent cannot create code that would run as anyone else: no routines, events or foreign definers', async () => {
    const episode = await env.startEpisode(DML_TASK, { maxTurns: 16 });
    try {
      for (const statement of [
        'CREATE FUNCTION f() RETURNS INT RETURN 1',
        'CREATE PROCEDURE p() SELECT 1',
        'CREATE EVENT e ON SCHEDULE EVERY 1 SECOND DO SELECT 1',
        'CREATE DEFINER = root@localhost VIEW v AS SELECT 1',
        `CREATE DEFINER = root@localhost TRIGGER t BEFORE INSERT ON ${TABLE} FOR EACH ROW SET NEW.School = 'x'`,
      ]) {
        const outcome = await episode.step(sql(statement), { byHarness: true });
        expect({ statement, kind: outcome.kind }).toEqual({ statement, kind: 'error' });
        expect(outcome.observation).toMatch(/denied/);
      }
    } finally {
      await episode.close();
    }
  });
});

describe('caps on what an episode may grow', () => {
  test('growing the database with INSERT ... SELECT ends the episode at the cap', async () => {
    if (!(await onMariaDb())) return;
    const grow = sql("INSERT INTO big SELECT REPEAT('x', 1000000) FROM seq_1_to_4");
    const { episode, outcome } = await play([sql('CREATE TABLE big (a LONGTEXT)'), ...Array(16).fill(grow), FINAL_ANSWER]);
    expect(outcome).toMatchObject({ done: true, reward: 0, failureType: 'execution_error' });
    expect(outcome.observation).toMatch(/the episode's database holds \d+ bytes, past the sandbox's 33554432/);
    // 4 MB a statement: the statement that crossed 32 MiB was the last one run.
    expect(episode.result()?.statements).toBeLessThanOrEqual(10);
    await expectNothingLeft(episode.sandboxName);
  }, 60_000);
});

/** The episode database's folder in the server's datadir, when the server runs on this machine (null when it does not). */
async function databaseFolder(name: string): Promise<string | null> {
  const [rows] = await host.admin.query<RowDataPacket[]>('SELECT @@datadir AS dir');
  const dir = String(rows[0].dir);
  return existsSync(dir) ? path.join(dir, name) : null;
}

/** Bytes of the files in a folder (0 once it is gone). */
function folderBytes(folder: string): number {
  if (!existsSync(folder)) return 0;
  return readdirSync(folder).reduce((n, file) => n + statSync(path.join(folder, file)).size, 0);
}

/** The size of InnoDB's server-wide temporary tablespace (ibtmp1), as the server reports it. */
async function ibtmp1Bytes(): Promise<number> {
  const [rows] = await host.admin.query<RowDataPacket[]>(
    "SELECT FILE_SIZE AS bytes FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = 'innodb_temporary'",
  );
  return Number(rows[0].bytes);
}

async function serverMemoryUsed(): Promise<number> {
  const [rows] = await host.admin.query<RowDataPacket[]>("SHOW GLOBAL STATUS LIKE 'Memory_used'");
  return Number(rows[0].Value);
}

/** The highest reading of `probe` while `work` runs (sampled every 20 ms), and what `work` gave. */
async function peakWhile<T>(work: Promise<T>, probe: () => Promise<number>): Promise<{ value: T; peak: number }> {
  let settled = false;
  const done = work.finally(() => {
    settled = true;
  });
  let peak = await probe();
  while (!settled) {
    peak = Math.max(peak, await probe());
    await new Promise((r) => setTimeout(r, 20));
  }
  return { value: await done, peak: Math.max(peak, await probe()) };
}

describe('engines and temporary tables: nothing outside the caps, nothing left on the server', () => {
  const MiB = 1024 * 1024;

  test('a CSV table (which reports no size) ends the episode as a wrong answer, even after the right INSERT; its folder never passes the cap', async () => {
    if (!(await onMariaDb())) return;
    const gold = String(tasks.find((t) => t.taskId === DML_TASK)!.entry.label[0]);
    const episode = await env.startEpisode(DML_TASK, { maxTurns: 16 });
    const folder = await databaseFolder(episode.sandboxName);
    let largest = 0;
    let outcome = await episode.step(sql(gold));
    const attack = [
      sql('CREATE TABLE c (a LONGTEXT NOT NULL) ENGINE = CSV'),
      ...Array(12).fill(sql("INSERT INTO c SELECT REPEAT('x', 1000000) FROM seq_1_to_4")),
      FINAL_ANSWER,
    ];
    for (const reply of attack) {
      if (outcome.done) break;
      outcome = await episode.step(reply);
      if (folder) largest = Math.max(largest, folderBytes(folder));
    }
    // Judged from the host first: the files on the server's disk, then what the episode recorded.
    if (folder) expect({ largest, underCap: largest <= host.limits.maxDatabaseBytes }).toEqual({ largest, underCap: true });
    expect(outcome).toMatchObject({ done: true, reward: 0, success: false, failureType: 'wrong_answer' });
    expect(outcome.observation).toMatch(/table 'c' is stored by CSV, which the sandbox does not allow/);
    expect(episode.result()).toMatchObject({
      ending: 'refused',
      status: 'agent_invalid_action',
      statements: 2,
      answer: expect.stringMatching(/^\(not scored: table 'c' is stored by CSV/),
    });
    await expectNothingLeft(episode.sandboxName);
  }, 60_000);

  test('every way to a table of another engine, or with its files elsewhere, ends the episode at that statement as a wrong answer', async () => {
    if (!(await onMariaDb())) return;
    // DATA DIRECTORY needs no FILE privilege: the server writes the table's files wherever its OS user may.
    const outside = `d${Date.now()}`;
    const attacks: Array<{ replies: string[]; reason: RegExp }> = [
      {
        replies: [sql('CREATE TABLE m (a VARCHAR(100)) ENGINE = MEMORY')],
        reason: /table 'm' is stored by MEMORY, which the sandbox does not allow/,
      },
      {
        replies: [sql('CREATE TABLE u (a INT) ENGINE = MRG_MyISAM')],
        reason: /table 'u' is stored by MRG_MyISAM, which the sandbox does not allow/,
      },
      {
        replies: [sql('CREATE TABLE a (a INT NOT NULL)'), sql('ALTER TABLE a ENGINE = CSV')],
        reason: /table 'a' is stored by CSV, which the sandbox does not allow/,
      },
      {
        replies: [sql("CREATE TABLE s (a VARCHAR(10) NOT NULL) ENGINE = CSV SELECT 'x' AS a")],
        reason: /table 's' is stored by CSV, which the sandbox does not allow/,
      },
      {
        replies: [
          sql(
            "SET STATEMENT max_heap_table_size = 4294967296 FOR CREATE TABLE m (a VARCHAR(1000)) ENGINE = MEMORY SELECT REPEAT('x', 1000) AS a FROM seq_1_to_1000",
          ),
        ],
        reason: /table 'm' is stored by MEMORY, which the sandbox does not allow/,
      },
      {
        replies: [sql(`CREATE TABLE ${outside} (a INT) ENGINE = MyISAM DATA DIRECTORY = '/tmp'`)],
        reason: new RegExp(`table '${outside}' keeps its files outside the database's folder \\(DATA DIRECTORY\\)`),
      },
    ];
    for (const { replies, reason } of attacks) {
      const { episode, outcome } = await play([...replies, FINAL_ANSWER]);
      const seen = {
        replies,
        done: outcome.done,
        failureType: outcome.failureType,
        ending: episode.result()?.ending,
        statements: episode.result()?.statements,
      };
      expect(seen).toEqual({ replies, done: true, failureType: 'wrong_answer', ending: 'refused', statements: replies.length });
      expect(episode.result()?.answer).toMatch(/^\(not scored: /);
      expect(episode.result()?.answer).toMatch(reason);
      await expectNothingLeft(episode.sandboxName);
    }
    // Dropped with the database (when the server runs on this machine, its /tmp is this one).
    expect(existsSync(`/tmp/${outside}.MYD`)).toBe(false);
  }, 60_000);

  test('a temporary InnoDB table is refused, and the server-wide ibtmp1 (which only a restart shrinks) does not grow', async () => {
    if (!(await onMariaDb())) return;
    const before = await ibtmp1Bytes();
    const episode = await env.startEpisode(DML_TASK, { maxTurns: 16 });
    let observation: string;
    try {
      // About 50 MB, were it allowed (1 s of it took ibtmp1 from 12 to 140 MiB): far past the tolerance.
      observation = (await episode.step(sql("CREATE TEMPORARY TABLE t ENGINE = InnoDB SELECT REPEAT('x', 10000) AS a FROM seq_1_to_5000")))
        .observation;
    } finally {
      await episode.close();
    }
    const grewBy = (await ibtmp1Bytes()) - before;
    expect({ grewBy, small: grewBy <= 4 * MiB }).toEqual({ grewBy, small: true });
    expect(observation).toMatch(/^1044 \(42000\): Access denied for user/);
    await expectNothingLeft(episode.sandboxName);
  }, 30_000);

  test("a temporary MEMORY table under a raised max_heap_table_size is refused, and the server's memory does not rise", async () => {
    if (!(await onMariaDb())) return;
    const before = await serverMemoryUsed();
    const episode = await env.startEpisode(DML_TASK, { maxTurns: 16 });
    try {
      // About 150 MB, were it allowed, held until the statement's time limit by the last row's SLEEP.
      const attack = sql(
        'SET STATEMENT max_heap_table_size = 4294967296 FOR CREATE TEMPORARY TABLE m (a VARCHAR(1000), b INT) ENGINE = MEMORY ' +
          "SELECT REPEAT('x', 1000) AS a, IF(seq = 150000, SLEEP(100), 0) AS b FROM seq_1_to_150000",
      );
      const { value: outcome, peak } = await peakWhile(episode.step(attack), serverMemoryUsed);
      // Other sessions on a shared server move the figure a little; the attack would move it by 150 MB.
      const roseBy = peak - before;
      expect({ roseBy, small: roseBy < 32 * MiB }).toEqual({ roseBy, small: true });
      expect(outcome.observation).toMatch(/^1044 \(42000\): Access denied for user/);
    } finally {
      await episode.close();
    }
    await expectNothingLeft(episode.sandboxName);
  }, 30_000);
});

describe("a killed worker's leftovers", () => {
  test('are swept at the next start: its sessions ended, its database and user dropped, however young', async () => {
    const worker = spawn(
      process.execPath,
      // tsx as a loader, not its CLI: the CLI runs the script in a child that SIGKILL would not reach.
      ['--import', 'tsx', path.join(__dirname, 'fixtures/dbbench-dying-worker.ts'), DBBENCH_TEST_URL, PREFIX, DEV_SPLIT],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const name = await new Promise<string>((resolve, reject) => {
      let out = '';
      worker.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('\n')) resolve((JSON.parse(out.split('\n')[0]) as { name: string }).name);
      });
      worker.on('exit', (code) => reject(new Error(`the worker exited (${code}) before opening its sandbox`)));
    });
    const exited = new Promise((resolve) => worker.on('exit', resolve));
    worker.kill('SIGKILL');
    await exited;
    // The server still runs the dead worker's statement in the episode's database.
    expect((await sessionsOf(host.admin, name)).join('\n')).toMatch(/SLEEP\(600\)/);
    expect(await databaseExists(host.admin, name)).toBe(true);

    const nextHost = new SandboxHost({ adminUrl: DBBENCH_TEST_URL, prefix: PREFIX });
    const nextEnv = new DbBenchEnvironment({ tasks, host: nextHost });
    try {
      const episode = await nextEnv.startEpisode(DML_TASK, { maxTurns: 16 });
      await episode.close();
      await expectNothingLeft(name);
    } finally {
      await nextHost.close();
    }
  }, 60_000);

  test("a live host's sandboxes are not swept by another's start, however old the sweep's bound", async () => {
    const episode = await env.startEpisode(DML_TASK, { maxTurns: 16 });
    const otherHost = new SandboxHost({ adminUrl: DBBENCH_TEST_URL, prefix: PREFIX });
    try {
      const report = await otherHost.sweep({ olderThanMs: 0 });
      expect(report.databases).not.toContain(episode.sandboxName);
      expect(await databaseExists(host.admin, episode.sandboxName)).toBe(true);
      expect((await episode.step(sql('SELECT 1'))).observation).toBe('[(1,)]');
    } finally {
      await otherHost.close();
      await episode.close();
    }
  });
});

test("a task table whose column name holds `?` is built with its own values: placeholders never reach into names (a row's text is not run as the admin's SQL)", async () => {
  const base = tasks.find((t) => t.taskId === DML_TASK)!;
  const hostile = "x'), ('injected";
  const table = {
    ...base.entry.table,
    table_name: 'qm',
    table_info: {
      columns: [
        { name: 'a?', type: 'text' },
        { name: 'b', type: 'text' },
      ],
      rows: [
        ['one', hostile],
        ['two?', 'three'],
      ],
    },
  };
  const task: DbBenchTask = { ...base, taskId: 'dbbench-question-mark', entry: { ...base.entry, table } };
  const qmEnv = new DbBenchEnvironment({ tasks: [task], host });
  const episode = await qmEnv.startEpisode(task.taskId, { maxTurns: 4 });
  try {
    const [rows] = await host.admin.query<RowDataPacket[]>(`SELECT \`a?\` AS a, b FROM \`${episode.sandboxName}\`.qm ORDER BY a`);
    expect(rows.map((r) => [r.a, r.b])).toEqual([
      ['one', hostile],
      ['two?', 'three'],
    ]);
  } finally {
    await episode.close();
  }
  await expectNothingLeft(episode.sandboxName);
}, 30_000);
