-- The shard of a key: stable across platforms (hashtextextended is the
-- hash PostgreSQL's hash partitioning relies on).
CREATE OR REPLACE FUNCTION pgoutbox.shard_of(key text, id bigint, shards integer)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN key IS NULL THEN (id % shards)::integer
                ELSE (((hashtextextended(key, 0) % shards) + shards) % shards)::integer
           END
$$;
