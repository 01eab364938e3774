/**
 * Runs made up in SQL (generate_series), not by training, for the viewer's
 * page bench (infra/bench/viewer-pages.ts): a store's size, not a run's
 * learning, is what is measured. Each step holds ROLLOUTS_PER_STEP rollouts
 * (TASKS_PER_STEP tasks x GROUP_SIZE base rollouts, DEAD_PER_STEP dead groups
 * rescued with GROUP_SIZE more).
 */
import { Client } from 'pg';
import { SIM_KIND } from '../sim-kind';

export const ROLLOUTS_PER_STEP = 1000;
const TASKS_PER_STEP = 100;
const GROUP_SIZE = 8;
const DEAD_PER_STEP = 25;

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
    `INSERT INTO runs (run_id, name, env, config) VALUES ($1, $1, $3, jsonb_build_object('name', $1::text, 'steps', $2::int, 'env', jsonb_build_object('kind', $3::text)))`,
    [runId, steps, SIM_KIND],
  );
  await db.query(
    `INSERT INTO steps (run_id, step, policy_version, summary) SELECT $1::text, s, 'p' || (s + 1), ${stepSummarySql()} FROM generate_series(0, $2 - 1) s, (SELECT $2::int AS n) c`,
    [runId, steps],
  );
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

/** Seeds each of `runs` ([run id, steps]) at the database, skipping one already there with its rollouts. */
export async function seedSyntheticRuns(
  databaseUrl: string,
  runs: ReadonlyArray<readonly [string, number]>,
  log: (line: string) => void,
): Promise<void> {
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    for (const [runId, steps] of runs) await seedRun(db, runId, steps, log);
  } finally {
    await db.end();
  }
}
