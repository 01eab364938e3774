-- Up Migration
-- What the harness did to a rollout's conversation (core/policy/trajectory.ts
-- HarnessIntervention): its system prompt, scaffold actions, repaired or
-- refused actions, and what it added to or cut from observations, each with
-- the message it marks. Null for rollouts stored before it was recorded.
ALTER TABLE trajectories ADD COLUMN interventions jsonb;

-- The trajectory viewer's search by task id or its prefix (harness-s ui): a
-- task's rollouts across the run's steps, without reading the run's other rows.
CREATE INDEX trajectories_by_task ON trajectories (run_id, task_id text_pattern_ops, phase, step) WHERE superseded_by IS NULL;
-- Runs newest first.
CREATE INDEX runs_by_created ON runs (created_at DESC, run_id);

-- Down Migration
DROP INDEX runs_by_created;
DROP INDEX trajectories_by_task;
ALTER TABLE trajectories DROP COLUMN interventions;
