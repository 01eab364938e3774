-- Up Migration
-- The Tinker session that owns a run's trainer model: kept alive by the trainer
-- workers, since a trainer unloads the models of a silent session.
ALTER TABLE runs ADD COLUMN trainer_session_id text;
-- The last seq_id a trainer step used on its model (the next step's ops follow
-- it), and the publish probe: a token sequence with the trainer's log-probs
-- under the step's weights, which every inference server must reproduce.
ALTER TABLE trainer_steps ADD COLUMN seq_id_end integer;
ALTER TABLE trainer_steps ADD COLUMN probe jsonb;

-- Down Migration
ALTER TABLE trainer_steps DROP COLUMN probe;
ALTER TABLE trainer_steps DROP COLUMN seq_id_end;
ALTER TABLE runs DROP COLUMN trainer_session_id;
