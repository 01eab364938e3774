-- Up Migration
-- A run's config after each safe change (workflow update updateConfig), keyed by
-- the first step that ran with it; runs.config holds the latest.
CREATE TABLE run_config_changes (
  run_id      text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  from_step   integer NOT NULL,
  config      jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, from_step)
);

-- Down Migration
DROP TABLE run_config_changes;
