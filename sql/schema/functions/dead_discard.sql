-- Deletes dead letters of a queue, in one statement: those named by ids
-- (NULL: every one) that match topic and type (NULL: any).  Returns the
-- ids deleted.  `pgoutbox dead discard` calls it.
CREATE OR REPLACE FUNCTION pgoutbox.dead_discard(queue text, ids bigint[] DEFAULT NULL,
                                                 topic text DEFAULT NULL,
                                                 type text DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM pgoutbox.dead_letters x
     WHERE x.queue = dead_discard.queue
       AND (dead_discard.ids IS NULL OR x.id = ANY (dead_discard.ids))
       AND (dead_discard.topic IS NULL OR x.topic = dead_discard.topic)
       AND (dead_discard.type IS NULL OR x.type = dead_discard.type)
    RETURNING x.id
$$;

COMMENT ON FUNCTION pgoutbox.dead_discard(text, bigint[], text, text) IS
    'Deletes dead letters of a queue (ids, or all; matching topic and type).';
