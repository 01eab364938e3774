-- Up Migration
-- Which execution chain owns a run id: a fresh start under an id already used
-- by another chain is refused instead of silently reusing its results.
ALTER TABLE runs ADD COLUMN incarnation text;

-- Down Migration
ALTER TABLE runs DROP COLUMN incarnation;
