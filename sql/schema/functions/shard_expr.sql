-- The generation expression of a queue with `shards` shards: the body of
-- pgoutbox.shard_of with the count as a constant.  The constants are
-- written as bigint literals ('64', not 64) so that the stored expression
-- holds no casts: PostgreSQL reads it back from its text form and plans
-- it at the start of every INSERT and COPY, and its length is what that
-- costs (182k instructions per INSERT with casts folded, 216k without,
-- 269k through shard_of, measured with callgrind).
CREATE OR REPLACE FUNCTION pgoutbox.shard_expr(shards integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT format('(CASE WHEN key IS NULL THEN id %% %1$L '
                  'ELSE ((hashtextextended(key, %2$L) %% %1$L) + %1$L) %% %1$L END)::integer',
                  shards::text, '0')
$$;
