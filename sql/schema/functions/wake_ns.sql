-- The advisory-lock namespace of a queue's sleeper lock (first key; the
-- second is 0).
CREATE OR REPLACE FUNCTION pgoutbox.wake_ns(queue text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtext('pgoutbox.wake.' || queue)
$$;
