-- Up Migration
CREATE TABLE runs (
  run_id            text PRIMARY KEY,
  name              text NOT NULL,
  env               text NOT NULL,
  config            jsonb NOT NULL,
  trainer_model_id  text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now()
);

-- One row per rollout. The key makes every write idempotent: an activity that
-- runs twice finds its rollouts already stored and does not add them again.
-- phase is 'train' for training steps, 'probe-v<N>' for profile measurements.
CREATE TABLE trajectories (
  run_id          text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  phase           text NOT NULL,
  step            integer NOT NULL,
  task_id         text NOT NULL,
  harness_id      text NOT NULL,
  sample          integer NOT NULL,
  role            text NOT NULL,
  task_kind       text NOT NULL,
  policy_version  text NOT NULL,
  reward          double precision NOT NULL,
  success         boolean NOT NULL,
  failure_type    text,
  turns           integer NOT NULL,
  tokens          integer NOT NULL,
  latency_ms      integer NOT NULL,
  messages        jsonb NOT NULL,
  samples         jsonb NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, phase, step, task_id, harness_id, sample)
);

CREATE TABLE steps (
  run_id          text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  step            integer NOT NULL,
  policy_version  text NOT NULL,
  summary         jsonb NOT NULL,
  completed_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, step)
);

CREATE TABLE trainer_steps (
  run_id          text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  step            integer NOT NULL,
  model_id        text NOT NULL,
  sampler_path    text NOT NULL,
  policy_version  text NOT NULL,
  datums          integer NOT NULL,
  response_tokens integer NOT NULL,
  metrics         jsonb NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, step)
);

CREATE TABLE profiles (
  run_id          text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  version         integer NOT NULL,
  policy_version  text NOT NULL,
  cells           jsonb NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, version)
);

-- Down Migration
DROP TABLE profiles;
DROP TABLE trainer_steps;
DROP TABLE steps;
DROP TABLE trajectories;
DROP TABLE runs;
