-- Up Migration
-- Which policy versions each inference replica serves (core/store/replica-store.ts).
-- A row is written 'pending' for every replica of a run when a version is
-- published, becomes 'loading' while a publish or a replica keeper loads it
-- (claimed_by, claimed_at: who, since when; a claim older than a minute is
-- taken over), and 'ready' once the replica has loaded it and answered the
-- publish probe within tolerance. Rollout workers send a version's turns only
-- to its 'ready' replicas; one that answers 404 for it (a restarted replica
-- forgot its adapters) is set back to 'pending', and its keeper loads it again.
-- step, sampler_path and probe_run_id/probe_step say how to load it again.
-- via: how the replica gets adapters, as the run config says
-- (policy.publishVia: 'shared-storage' or 'replica-workers').
CREATE TABLE replica_versions (
  replica             text NOT NULL,
  policy_version      text NOT NULL,
  run_id              text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  step                integer NOT NULL,
  sampler_path        text NOT NULL,
  probe_run_id        text NOT NULL,
  probe_step          integer NOT NULL,
  via                 text NOT NULL CHECK (via IN ('shared-storage', 'replica-workers')),
  state               text NOT NULL CHECK (state IN ('pending', 'loading', 'ready')),
  reason              text,
  probe_mean_abs_diff double precision,
  claimed_by          text,
  claimed_at          timestamptz,
  ready_at            timestamptz,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (replica, policy_version)
);
CREATE INDEX replica_versions_by_version ON replica_versions (policy_version);
CREATE INDEX replica_versions_by_run ON replica_versions (run_id, replica, created_at DESC);

-- Down Migration
DROP TABLE replica_versions;
