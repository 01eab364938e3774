-- Up Migration
-- Training-state checkpoints (weights and optimizer state, saved with the
-- Tinker API's save_weights): one row per checkpoint a run saved, with the
-- step whose state it holds. deleted_at is set once the trainer deleted it
-- (only the last checkpoint.keep are kept).
CREATE TABLE checkpoints (
  run_id          text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  step            integer NOT NULL,
  model_id        text NOT NULL,
  name            text NOT NULL,
  path            text NOT NULL,
  policy_version  text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  deleted_at      timestamptz,
  PRIMARY KEY (run_id, model_id, name)
);
CREATE INDEX checkpoints_by_step ON checkpoints (run_id, step);

-- A run's trainer model made anew: a restore after the trainer lost the model
-- (kind 'checkpoint': loaded from the latest checkpoint; 'base': started over
-- from the base model) or the load of a fork from its parent's checkpoint
-- (kind 'fork', restore 0). from_step is the step whose state was loaded (null
-- from the base); at_step the step that found the model gone. The row is
-- written before the new model loads (model_id, status 'loading') so a retried
-- restore frees that model instead of leaking it, and completes once the run
-- moved to it.
CREATE TABLE trainer_restores (
  run_id            text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  restore           integer NOT NULL,
  kind              text NOT NULL CHECK (kind IN ('checkpoint', 'base', 'fork')),
  at_step           integer NOT NULL,
  from_run_id       text,
  from_step         integer,
  checkpoint_path   text,
  lost_model_id     text,
  model_id          text,
  session_id        text,
  policy_version    text,
  sampler_path      text,
  reason            text NOT NULL,
  status            text NOT NULL DEFAULT 'loading' CHECK (status IN ('loading', 'done')),
  created_at        timestamptz NOT NULL DEFAULT now(),
  completed_at      timestamptz,
  PRIMARY KEY (run_id, restore)
);
-- A model is lost once: its restore is found again by it.
CREATE UNIQUE INDEX trainer_restores_by_lost_model ON trainer_restores (run_id, lost_model_id) WHERE lost_model_id IS NOT NULL;

-- A fork's parent: the run and the step whose checkpoint it started from.
ALTER TABLE runs ADD COLUMN parent_run_id text;
ALTER TABLE runs ADD COLUMN parent_step integer;

-- Steps re-run after a restore: what the superseded steps stored stays, marked
-- with the restore that superseded it, and is never read as the run's again.
-- The keys that made every write idempotent now hold among live rows only.
ALTER TABLE trajectories ADD COLUMN superseded_by integer;
ALTER TABLE trajectories DROP CONSTRAINT trajectories_pkey;
CREATE UNIQUE INDEX trajectories_live ON trajectories (run_id, phase, step, task_id, harness_id, sample) WHERE superseded_by IS NULL;
CREATE INDEX trajectories_by_step ON trajectories (run_id, phase, step);

ALTER TABLE steps ADD COLUMN superseded_by integer;
ALTER TABLE steps DROP CONSTRAINT steps_pkey;
CREATE UNIQUE INDEX steps_live ON steps (run_id, step) WHERE superseded_by IS NULL;

ALTER TABLE trainer_steps ADD COLUMN superseded_by integer;
ALTER TABLE trainer_steps DROP CONSTRAINT trainer_steps_pkey;
CREATE UNIQUE INDEX trainer_steps_live ON trainer_steps (run_id, step) WHERE superseded_by IS NULL;

ALTER TABLE routing_decisions ADD COLUMN superseded_by integer;
ALTER TABLE routing_decisions DROP CONSTRAINT routing_decisions_pkey;
CREATE UNIQUE INDEX routing_decisions_live ON routing_decisions (run_id, step, task_id) WHERE superseded_by IS NULL;

ALTER TABLE evaluations ADD COLUMN superseded_by integer;
ALTER TABLE evaluations DROP CONSTRAINT evaluations_pkey;
CREATE UNIQUE INDEX evaluations_live ON evaluations (run_id, after_steps) WHERE superseded_by IS NULL;

-- A restored run's new model sends the re-run steps' ops under its own seq_ids.
DROP INDEX trainer_ops_live;
CREATE UNIQUE INDEX trainer_ops_live ON trainer_ops (run_id, model_id, step, op) WHERE failed_at IS NULL;

-- Down Migration
DROP INDEX trainer_ops_live;
DELETE FROM trainer_ops a USING trainer_ops b
  WHERE a.failed_at IS NULL AND b.failed_at IS NULL AND a.run_id = b.run_id AND a.step = b.step AND a.op = b.op AND a.seq_id < b.seq_id AND a.model_id <> b.model_id;
CREATE UNIQUE INDEX trainer_ops_live ON trainer_ops (run_id, step, op) WHERE failed_at IS NULL;
DELETE FROM evaluations WHERE superseded_by IS NOT NULL;
DROP INDEX evaluations_live;
ALTER TABLE evaluations ADD PRIMARY KEY (run_id, after_steps);
ALTER TABLE evaluations DROP COLUMN superseded_by;
DELETE FROM routing_decisions WHERE superseded_by IS NOT NULL;
DROP INDEX routing_decisions_live;
ALTER TABLE routing_decisions ADD PRIMARY KEY (run_id, step, task_id);
ALTER TABLE routing_decisions DROP COLUMN superseded_by;
DELETE FROM trainer_steps WHERE superseded_by IS NOT NULL;
DROP INDEX trainer_steps_live;
ALTER TABLE trainer_steps ADD PRIMARY KEY (run_id, step);
ALTER TABLE trainer_steps DROP COLUMN superseded_by;
DELETE FROM steps WHERE superseded_by IS NOT NULL;
DROP INDEX steps_live;
ALTER TABLE steps ADD PRIMARY KEY (run_id, step);
ALTER TABLE steps DROP COLUMN superseded_by;
DELETE FROM trajectories WHERE superseded_by IS NOT NULL;
DROP INDEX trajectories_by_step;
DROP INDEX trajectories_live;
ALTER TABLE trajectories ADD PRIMARY KEY (run_id, phase, step, task_id, harness_id, sample);
ALTER TABLE trajectories DROP COLUMN superseded_by;
ALTER TABLE runs DROP COLUMN parent_step;
ALTER TABLE runs DROP COLUMN parent_run_id;
DROP TABLE trainer_restores;
DROP TABLE checkpoints;
