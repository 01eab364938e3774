-- Up Migration
-- When a run finished: set once by summarizeRun, the last activity of a run
-- that did its steps (or stopped at its budget); null while it goes on, and
-- for a run that failed or was cancelled. Every trainer worker keeps the
-- Tinker sessions of the runs not finished (core/rl/tinker/sessions.ts).
ALTER TABLE runs ADD COLUMN finished_at timestamptz;
-- Runs stored before this column whose last step is their config's last count
-- as finished then (summarizeRun's own rule for a run that did all its steps).
UPDATE runs SET finished_at = last.completed_at
  FROM (SELECT run_id, max(step) AS step, max(completed_at) AS completed_at FROM steps WHERE superseded_by IS NULL GROUP BY run_id) AS last
 WHERE last.run_id = runs.run_id
   AND (runs.config->>'steps') ~ '^[0-9]+$'
   AND last.step + 1 >= (runs.config->>'steps')::int;

-- Down Migration
ALTER TABLE runs DROP COLUMN finished_at;
