-- Up Migration
-- The Tinker session that owns a run's trainer model: kept alive by the trainer
-- workers, since a trainer unloads the models of a silent session.
ALTER TABLE runs ADD COLUMN trainer_session_id text;
-- The publish probe: a token sequence with the trainer's log-probs under the
-- step's weights, which every inference server must reproduce.
ALTER TABLE trainer_steps ADD COLUMN probe jsonb;
-- The seq_id ledger: every op a step sends to its trainer model, under the
-- seq_id that makes it exactly-once. A retried step sends each op under the
-- seq_id it was given; an op whose future failed (the trainer did not apply
-- it) is marked failed and gets a new seq_id when sent again, since a trainer
-- answers a used seq_id with the same, failed, future.
CREATE TABLE trainer_ops (
  model_id text NOT NULL,
  seq_id integer NOT NULL,
  run_id text NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  step integer NOT NULL,
  op text NOT NULL,
  checkpoint_name text,
  created_at timestamptz NOT NULL DEFAULT now(),
  failed_at timestamptz,
  failure text,
  PRIMARY KEY (model_id, seq_id)
);
CREATE UNIQUE INDEX trainer_ops_live ON trainer_ops (run_id, step, op) WHERE failed_at IS NULL;

-- Down Migration
DROP TABLE trainer_ops;
ALTER TABLE trainer_steps DROP COLUMN probe;
ALTER TABLE runs DROP COLUMN trainer_session_id;
