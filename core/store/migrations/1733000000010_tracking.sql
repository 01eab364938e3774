-- Up Migration
-- What of a run has been logged to an experiment tracker (core/tracking/):
-- one row per (run, tracker). The tracker's own run id is stored as soon as it
-- is made, before anything is logged. logged_steps maps each step logged to
-- the completed_at (ms) of the steps row it came from, so a step re-run after
-- a restore is logged again; logged_evaluations maps after_steps to the
-- evaluations row's created_at (ms). ended_as is how the tracker's run was
-- ended (FINISHED or FAILED; null while the run goes on), report_logged
-- whether the run's report was uploaded. last_error is the last failure to
-- reach the tracker (null once a call went through); the next call catches up.
CREATE TABLE tracking_exports (
  run_id              text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  tracker             text NOT NULL,
  external_run_id     text,
  experiment_id       text,
  params_logged       boolean NOT NULL DEFAULT false,
  logged_steps        jsonb NOT NULL DEFAULT '{}',
  logged_evaluations  jsonb NOT NULL DEFAULT '{}',
  report_logged       boolean NOT NULL DEFAULT false,
  ended_as            text,
  last_error          text,
  last_error_at       timestamptz,
  updated_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, tracker)
);

-- Down Migration
DROP TABLE tracking_exports;
