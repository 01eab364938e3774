-- Up Migration
-- Directional Harness Evolution (workflow evolveHarnessPool): every proposal,
-- every validation rollout and every selection decision, keyed so that a
-- resumed evolution finds what was done and repeats nothing; and the frozen
-- pools it writes, keyed by their content hash.
CREATE TABLE evolutions (
  evolution_id  text PRIMARY KEY,
  env           text NOT NULL,
  config        jsonb NOT NULL,
  base_spec     jsonb NOT NULL,
  dev_tasks     jsonb NOT NULL,
  pool_hash     text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  finished_at   timestamptz
);

CREATE TABLE evolution_candidates (
  evolution_id  text NOT NULL REFERENCES evolutions (evolution_id) ON DELETE CASCADE,
  candidate_id  text NOT NULL,
  round         integer NOT NULL,
  direction     text NOT NULL,
  slot          integer NOT NULL,
  parent        text NOT NULL,
  spec          jsonb NOT NULL,
  version       text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (evolution_id, candidate_id)
);

CREATE TABLE evolution_proposals (
  evolution_id  text NOT NULL REFERENCES evolutions (evolution_id) ON DELETE CASCADE,
  round         integer NOT NULL,
  direction     text NOT NULL,
  slot          integer NOT NULL,
  attempt       integer NOT NULL,
  proposer      text NOT NULL,
  messages      jsonb NOT NULL,
  answer        text NOT NULL,
  verdict       text NOT NULL CHECK (verdict IN ('accepted', 'invalid', 'off_direction')),
  reason        text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (evolution_id, round, direction, slot, attempt)
);

CREATE TABLE evolution_rollouts (
  evolution_id  text NOT NULL REFERENCES evolutions (evolution_id) ON DELETE CASCADE,
  phase         text NOT NULL,
  candidate_id  text NOT NULL,
  task_id       text NOT NULL,
  sample        integer NOT NULL,
  task_kind     text NOT NULL,
  success       boolean NOT NULL,
  failure_type  text,
  turns         integer NOT NULL,
  tokens        integer NOT NULL,
  messages      jsonb NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (evolution_id, phase, candidate_id, task_id, sample)
);

CREATE TABLE evolution_selections (
  evolution_id  text NOT NULL REFERENCES evolutions (evolution_id) ON DELETE CASCADE,
  round         integer NOT NULL,
  direction     text NOT NULL,
  decision      jsonb NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (evolution_id, round, direction)
);

CREATE TABLE harness_pools (
  pool_hash     text PRIMARY KEY,
  env           text NOT NULL,
  evolution_id  text,
  manifest      jsonb NOT NULL,
  specs         jsonb NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);

-- The pool a run trained with (its content hash), set when the run is prepared.
ALTER TABLE runs ADD COLUMN pool_hash text;

-- Down Migration
ALTER TABLE runs DROP COLUMN pool_hash;
DROP TABLE harness_pools;
DROP TABLE evolution_selections;
DROP TABLE evolution_rollouts;
DROP TABLE evolution_proposals;
DROP TABLE evolution_candidates;
DROP TABLE evolutions;
