-- Up Migration
-- What a rollout cost the inference server: the prompt tokens it processed and
-- the completion tokens it generated, summed over the episode's turns (a
-- multi-turn episode's prompt is counted each turn, as the server processes
-- it). Null for rollouts stored before it was recorded.
ALTER TABLE trajectories ADD COLUMN prompt_tokens integer, ADD COLUMN completion_tokens integer;

-- Down Migration
ALTER TABLE trajectories DROP COLUMN prompt_tokens, DROP COLUMN completion_tokens;
