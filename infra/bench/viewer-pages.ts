/**
 * How fast the trajectory viewer's pages open on a large run store: seeds a
 * run with `rows` rollouts (1,000 per step: 100 tasks x 8 base rollouts, 25
 * dead groups rescued with 8 more) beside a small run of 3 steps, serves the
 * viewer over that database, and times each page (median of `repeats` GETs).
 * The rows are made in SQL (generate_series), not by training: a store's
 * size, not a run's learning, is what is measured.
 *
 *   npx tsx infra/bench/viewer-pages.ts [--rows 1000000] [--repeats 5] [--database URL] [--json]
 */
import { Command, InvalidArgumentError } from 'commander';
import { Client } from 'pg';
import { migrate } from '../../core/store/run-store';
import { serveRunStore } from '../../viewer/server';

const ROLLOUTS_PER_STEP = 1000;
const TASKS_PER_STEP = 100;
const GROUP_SIZE = 8;
const DEAD_PER_STEP = 25;
export const BIG_RUN = 'viewer-bench-big';
export const SMALL_RUN = 'viewer-bench-small';

export interface PageTiming {
  page: string;
  run: string;
  address: string;
  /** Milliseconds, median and slowest of the repeats. */
  medianMs: number;
  maxMs: number;
  bytes: number;
}

/** One step's summary as a run stores it (the figures are made up; the shape is the real one). */
function stepSummarySql(): string {
  return `jsonb_build_object(
    'step', s, 'policyVersionBefore', 'p' || s, 'policyVersion', 'p' || (s + 1), 'profileVersion', 1, 'tasks', ${TASKS_PER_STEP},
    'baseRollouts', ${TASKS_PER_STEP * GROUP_SIZE}, 'rescueRollouts', ${DEAD_PER_STEP * GROUP_SIZE}, 'baseSuccessRate', 0.2 + 0.5 * s / greatest(n, 1),
    'baseMeanReward', 0.2 + 0.5 * s / greatest(n, 1), 'deadGroups', ${DEAD_PER_STEP}, 'deadTaskIds', '[]'::jsonb, 'rescuedGroups', ${DEAD_PER_STEP - 5},
    'liveGroupFraction', 0.95, 'siblings', '{}'::jsonb, 'datums', 1000, 'trainerMetrics', jsonb_build_object('loss:sum', 0.1),
    'durationSeconds', 10, 'phaseSeconds', jsonb_build_object('rollout', 6, 'train', 3, 'publish', 1), 'failedGroups', '[]'::jsonb)`;
}

/** Seeds one run of `steps` steps (ROLLOUTS_PER_STEP rollouts each), unless it is there already with them. */
async function seedRun(db: Client, runId: string, steps: number, log: (line: string) => void): Promise<void> {
  const { rows } = await db.query('SELECT count(*)::int AS n FROM trajectories WHERE run_id = $1', [runId]);
  if (rows[0].n === steps * ROLLOUTS_PER_STEP) return;
  log(`seeding ${runId}: ${steps} steps, ${steps * ROLLOUTS_PER_STEP} rollouts`);
  await db.query('DELETE FROM runs WHERE run_id = $1', [runId]);
  await db.query(
    `INSERT INTO runs (run_id, name, env, config) VALUES ($1, $1, 'sim', jsonb_build_object('name', $1::text, 'steps', $2::int, 'env', jsonb_build_object('kind', 'sim')))`,
    [runId, steps],
  );
  await db.query(`INSERT INTO steps (run_id, step, policy_version, summary) SELECT $1::text, s, 'p' || (s + 1), ${stepSummarySql()} FROM generate_series(0, $2 - 1) s, (SELECT $2::int AS n) c`, [runId, steps]);
  const batch = 50; // steps per INSERT: a few hundred MB of work at most per statement
  for (let from = 0; from < steps; from += batch) {
    const to = Math.min(steps, from + batch) - 1;
    await db.query(
      `INSERT INTO trajectories (run_id, phase, step, task_id, harness_id, sample, role, task_kind, policy_version, reward, success, failure_type,
         turns, tokens, latency_ms, messages, samples, prompt_tokens, completion_tokens, interventions)
       SELECT $1::text, 'train', s, 'task-' || lpad(t::text, 5, '0') || '-' || (s % 7), h, g, role, 'kind-' || (t % 4), 'p' || s,
              (CASE WHEN ok THEN 1 ELSE 0 END)::float8, ok, CASE WHEN ok THEN NULL WHEN g % 3 = 0 THEN 'turn_limit' ELSE 'wrong_answer' END,
              3, 120, 900,
              jsonb_build_array(
                jsonb_build_object('role', 'system', 'content', 'You are an agent. Reply with one action per turn.'),
                jsonb_build_object('role', 'user', 'content', 'Task ' || t || ': total a column over the matching rows of the table.'),
                jsonb_build_object('role', 'assistant', 'content', 'Action: inspect_schema'),
                jsonb_build_object('role', 'user', 'content', 'Observation: columns id, name, amount'),
                jsonb_build_object('role', 'assistant', 'content', 'Action: finish')),
              jsonb_build_array(jsonb_build_object('promptIds', jsonb_build_array(1, 2, 3, 4, 5, 6, 7, 8), 'responseIds', jsonb_build_array(9, 10, 11, 12, 13, 14),
                'responseMask', jsonb_build_array(1, 1, 1, 0, 1, 1), 'responseLogprobs', jsonb_build_array(-0.1, -0.5, -1.2, 0, -0.05, -0.3))),
              300, 20, jsonb_build_array(jsonb_build_object('message', 0, 'kind', 'context', 'detail', 'system prompt of harness ' || h))
       FROM generate_series($2::int, $3::int) s,
            LATERAL (
              SELECT t, g, 'base' AS h, 'base' AS role, (t >= ${DEAD_PER_STEP} AND (t + g + s) % 4 = 0) AS ok
                FROM generate_series(0, ${TASKS_PER_STEP - 1}) t, generate_series(0, ${GROUP_SIZE - 1}) g
              UNION ALL
              SELECT t, g, 'sibling-' || (g % 2), 'rescue', (t < ${DEAD_PER_STEP - 5} AND g % 4 = 1)
                FROM generate_series(0, ${DEAD_PER_STEP - 1}) t, generate_series(0, ${GROUP_SIZE - 1}) g
            ) r`,
      [runId, from, to],
    );
    await db.query(
      `INSERT INTO routing_decisions (run_id, step, task_id, task_kind, strategy, profile_version, failure_summary, failure_digest, failure_counts, chosen, scores, outcome)
       SELECT $1::text, s, 'task-' || lpad(t::text, 5, '0') || '-' || (s % 7), 'kind-' || (t % 4), 'validation', 1, 'all 8 failed: wrong_answer', md5(s || '/' || t),
              '{"wrong_answer": 5, "turn_limit": 3}'::jsonb, ARRAY['sibling-0', 'sibling-1'], '{"sibling-0": 0.4, "sibling-1": 0.3}'::jsonb,
              '{"sibling-0": {"rollouts": 4, "successes": 2}, "sibling-1": {"rollouts": 4, "successes": 0}}'::jsonb
       FROM generate_series($2::int, $3::int) s, generate_series(0, ${DEAD_PER_STEP - 1}) t`,
      [runId, from, to],
    );
    log(`  ${runId}: steps ${from}..${to} stored`);
  }
  await db.query('ANALYZE trajectories');
  await db.query('ANALYZE steps');
  await db.query('ANALYZE routing_decisions');
}

async function timePage(url: string, repeats: number): Promise<{ medianMs: number; maxMs: number; bytes: number }> {
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < repeats; i++) {
    const started = performance.now();
    const response = await fetch(url);
    const body = await response.text();
    if (response.status !== 200) throw new Error(`${url}: HTTP ${response.status}: ${body.slice(0, 300)}`);
    times.push(performance.now() - started);
    bytes = body.length;
  }
  times.sort((a, b) => a - b);
  return { medianMs: times[Math.floor(times.length / 2)], maxMs: times[times.length - 1], bytes };
}

/** The pages timed on each run: [name, address]. */
function pagesOf(runId: string, steps: number): Array<[string, string]> {
  const run = `/runs/${runId}`;
  const mid = Math.floor(steps / 2);
  const deep = Buffer.from(JSON.stringify(['train', Math.floor(steps * 0.9), 'task-00050-0', 'base', 0])).toString('base64url');
  return [
    ['run (steps, page 1)', run],
    ['run (steps, last page)', `${run}?page=${Math.max(1, Math.ceil(steps / 100))}`],
    ['step (groups, page 1)', `${run}/steps/${mid}`],
    ['step, filtered (rescued, by sibling)', `${run}/steps/${mid}?state=rescued&harness=sibling-1&outcome=success`],
    ['trajectory', `${run}/trajectories/train/${mid}/task-00003-${mid % 7}/base/0`],
    ['task side by side', `${run}/tasks/task-00003-${mid % 7}`],
    ['rollouts, first page', `${run}/rollouts`],
    ['rollouts, deep page (keyset, 90% in)', `${run}/rollouts?after=${deep}`],
    ['rollouts, task id prefix', `${run}/rollouts?task=task-00042`],
    ['rollouts, filtered (rescue successes of a kind)', `${run}/rollouts?role=rescue&outcome=success&kind=kind-2`],
    // The worst case: no index serves the filter and nothing matches, so the whole run is read.
    ['rollouts, a filter nothing matches', `${run}/rollouts?failure=policy_error`],
  ];
}

export async function benchViewerPages(options: { databaseUrl: string; rows: number; repeats: number; log: (line: string) => void }): Promise<PageTiming[]> {
  const bigSteps = Math.max(1, Math.round(options.rows / ROLLOUTS_PER_STEP));
  await migrate(options.databaseUrl);
  const db = new Client({ connectionString: options.databaseUrl });
  await db.connect();
  try {
    await seedRun(db, SMALL_RUN, 3, options.log);
    await seedRun(db, BIG_RUN, bigSteps, options.log);
  } finally {
    await db.end();
  }
  // No Temporal here: the status column reads 'unknown' after one failed connect, as when Temporal is down.
  const viewer = await serveRunStore({ databaseUrl: options.databaseUrl, temporalAddress: '127.0.0.1:1', namespace: 'default', host: '127.0.0.1', port: 0 });
  const timings: PageTiming[] = [];
  try {
    const runs = await timePage(`${viewer.url}/runs`, options.repeats);
    timings.push({ page: 'runs', run: '-', address: '/runs', ...runs });
    for (const [runId, steps] of [[SMALL_RUN, 3], [BIG_RUN, bigSteps]] as const) {
      for (const [page, address] of pagesOf(runId, steps)) {
        timings.push({ page, run: `${runId} (${steps * ROLLOUTS_PER_STEP} rollouts)`, address, ...(await timePage(`${viewer.url}${address}`, options.repeats)) });
      }
    }
  } finally {
    await viewer.close();
  }
  return timings;
}

function positive(name: string) {
  return (text: string) => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${name} takes a positive whole number`);
    return n;
  };
}

if (require.main === module) {
  const program = new Command('viewer-pages')
    .option('--rows <n>', 'rollouts of the large run', positive('--rows'), 1_000_000)
    .option('--repeats <n>', 'GETs per page (the median is reported)', positive('--repeats'), 5)
    .option('--database <url>', 'the run store to seed and read', 'postgresql://postgres@127.0.0.1:5432/harness_s_viewer_bench')
    .option('--json', 'print the timings as JSON')
    .parse();
  const opts = program.opts<{ rows: number; repeats: number; database: string; json?: boolean }>();
  benchViewerPages({ databaseUrl: opts.database, rows: opts.rows, repeats: opts.repeats, log: (line) => process.stderr.write(`${line}\n`) }).then(
    (timings) => {
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(timings, null, 2)}\n`);
        return;
      }
      for (const t of timings) {
        process.stdout.write(`${t.medianMs.toFixed(1).padStart(8)} ms median ${t.maxMs.toFixed(1).padStart(8)} ms max ${String(t.bytes).padStart(8)} B  ${t.run.padEnd(40)} ${t.page}\n`);
      }
    },
    (err: Error) => {
      process.stderr.write(`viewer-pages: ${err.message}\n`);
      process.exit(1);
    },
  );
}
