-- Moves dead letters of a queue back into it, in one statement: those
-- named by ids (NULL: every one) that match topic and type (NULL: any).
-- Each keeps its id and group and goes back due now with its attempts
-- reset; its last_error marks it as failed before, so that a relay
-- claims it below its claim floor (upgrade step 006).  Returns the ids
-- moved.  `pgoutbox dead retry` and `pgoutbox queue retry` call it.
CREATE OR REPLACE FUNCTION pgoutbox.dead_retry(queue text, ids bigint[] DEFAULT NULL,
                                               topic text DEFAULT NULL,
                                               type text DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    SELECT q.kind INTO k FROM pgoutbox.queues q WHERE q.name = dead_retry.queue;
    IF k IS NULL OR k = 'adopted' THEN
        RAISE EXCEPTION 'pgoutbox.dead_retry: no work queue or outbox named "%"', queue
            USING ERRCODE = 'undefined_table';
    END IF;
    RETURN QUERY EXECUTE format(
        'WITH d AS (DELETE FROM pgoutbox.dead_letters x WHERE x.queue = $1 '
        '             AND ($2::bigint[] IS NULL OR x.id = ANY ($2)) '
        '             AND ($3::text IS NULL OR x.topic = $3) '
        '             AND ($4::text IS NULL OR x.type = $4) RETURNING *) '
        'INSERT INTO pgoutbox.%I (id, topic, key, type, payload, headers, created_at, last_error%s) '
        'SELECT id, topic, key, type, payload, headers, created_at, '
        '       coalesce(last_error, ''put back from dead letters'')%s FROM d ORDER BY id '
        'RETURNING id', queue,
        CASE WHEN k = 'work' THEN ', group_key' ELSE '' END,
        CASE WHEN k = 'work' THEN ', group_key' ELSE '' END)
        USING queue, ids, topic, type;
END $$;

COMMENT ON FUNCTION pgoutbox.dead_retry(text, bigint[], text, text) IS
    'Moves dead letters (ids, or all; matching topic and type) back into their queue: same id, attempts reset.';
