-- Up Migration
-- Configs once held endpoint keys as literal `apiKey` fields (policy, trainer,
-- each voter). Keys now live only in the workers' environment (`apiKeyEnv`),
-- so stored configs drop the field, keys and placeholders alike.
CREATE FUNCTION pg_temp.without_api_keys(config jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN jsonb_typeof(config #> '{router,voters}') = 'array' THEN
      jsonb_set(
        config #- '{policy,apiKey}' #- '{trainer,apiKey}',
        '{router,voters}',
        COALESCE((SELECT jsonb_agg(CASE WHEN jsonb_typeof(v) = 'object' THEN v - 'apiKey' ELSE v END ORDER BY i)
                  FROM jsonb_array_elements(config #> '{router,voters}') WITH ORDINALITY AS e(v, i)), '[]'::jsonb))
    ELSE config #- '{policy,apiKey}' #- '{trainer,apiKey}'
  END
$$;

UPDATE runs SET config = pg_temp.without_api_keys(config) WHERE config::text LIKE '%"apiKey"%';
UPDATE run_config_changes SET config = pg_temp.without_api_keys(config) WHERE config::text LIKE '%"apiKey"%';

-- Down Migration
-- The keys are gone for good; nothing to restore.
SELECT 1;
