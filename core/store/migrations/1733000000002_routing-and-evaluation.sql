-- Up Migration
-- One row per routed dead group: what the router saw and chose, and, once the
-- step is recorded, how each chosen sibling did. Keyed like the group it
-- routes, so a retried routing activity finds its decision and keeps it.
CREATE TABLE routing_decisions (
  run_id            text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  step              integer NOT NULL,
  task_id           text NOT NULL,
  task_kind         text NOT NULL,
  strategy          text NOT NULL,
  profile_version   integer NOT NULL,
  failure_summary   text NOT NULL,
  failure_digest    text NOT NULL,
  -- failure type -> count among the base attempts
  failure_counts    jsonb NOT NULL,
  votes             jsonb NOT NULL DEFAULT '[]',
  -- true when the vote strategy had no usable vote and the validation rule decided
  fallback          boolean NOT NULL DEFAULT false,
  chosen            text[] NOT NULL,
  scores            jsonb NOT NULL DEFAULT '{}',
  -- harness id -> {rollouts, successes}; null until the step is recorded
  outcome           jsonb,
  created_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, step, task_id)
);

-- One row per evaluation (evaluatePolicy): base harness and Rank-1 routing on
-- the eval split, after `step` training steps.
CREATE TABLE evaluations (
  run_id            text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  after_steps       integer NOT NULL,
  policy_version    text NOT NULL,
  profile_version   integer NOT NULL,
  summary           jsonb NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, after_steps)
);

-- Down Migration
DROP TABLE evaluations;
DROP TABLE routing_decisions;
