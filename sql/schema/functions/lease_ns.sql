-- The advisory-lock namespace of a queue's shards (first of the two keys).
CREATE OR REPLACE FUNCTION pgoutbox.lease_ns(queue text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtext('pgoutbox.shards.' || queue)
$$;
