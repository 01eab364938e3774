-- Up Migration
-- Session slots on servers that several hosts share (a remote OpenEnv
-- server's sessions), counted here for every host
-- (core/store/session-lease-store.ts). One row per (server, slot) that is or
-- was leased; slot runs from 0 to the server's sessions - 1. holder is the
-- process that holds it (its worker identity), token the lease's own random
-- id. A lease is free again when its row is gone (released) or expires_at
-- has passed (its holder stopped renewing it: it died). Times are the
-- database's clock, so the hosts' clocks do not matter.
CREATE TABLE session_leases (
  server      text NOT NULL,
  slot        integer NOT NULL CHECK (slot >= 0),
  holder      text NOT NULL,
  token       uuid NOT NULL,
  taken_at    timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (server, slot)
);

-- Down Migration
DROP TABLE session_leases;
