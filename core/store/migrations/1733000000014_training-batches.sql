-- Up Migration
-- A training step's batch, which trainStep reads by reference instead of
-- taking every rollout in its input (a Temporal payload is limited to 2 MB):
-- one row per group, in batch order, keyed by the step workflow's id
-- (batch_key: <run>/step-<n>, or <run>/step-<n>-r<k> for a step re-run after
-- a trainer restore). rollouts is [{harnessId, sample, advantage}] in the
-- group's order. The step writes its groups in chunks; a chunk written again
-- (a retried activity, or the step run again after a resume) replaces its
-- rows, and the trainer reads the groups below the count it was given.
CREATE TABLE training_batch_groups (
  run_id       text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  batch_key    text NOT NULL,
  step         integer NOT NULL,
  group_index  integer NOT NULL,
  task_id      text NOT NULL,
  role         text NOT NULL CHECK (role IN ('base', 'rescue')),
  rollouts     jsonb NOT NULL,
  written_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, batch_key, group_index)
);

-- Down Migration
DROP TABLE training_batch_groups;
