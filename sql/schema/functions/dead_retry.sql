-- Moves dead letters of a queue back into it, in one statement: those
-- named by ids (NULL: every one) that match topic and type (NULL: any).
-- Each keeps its id and group and goes back due now with its attempts
-- reset; its last_error marks it as failed before, so that a relay
-- claims it below its claim floor (upgrade step 006).  Returns the ids
-- moved.  `pgoutbox dead retry` and `pgoutbox queue retry` call it.
-- A queue captured through the WAL (docs/wal.md) has no row to put back:
-- each dead letter is sent again as a new logical message, in id order,
-- with its id, created_at and the rest of its envelope, so that the
-- relay streams it at this transaction's commit (after the events
-- committed since it failed) and dedup downstream still knows its id.
-- That calls pg_logical_emit_message() as the caller.  So for a table
-- adopted with capture wal, whose rows may be gone (docs/adopt.md).
CREATE OR REPLACE FUNCTION pgoutbox.dead_retry(queue text, ids bigint[] DEFAULT NULL,
                                               topic text DEFAULT NULL,
                                               type text DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    c text;
    d record;
BEGIN
    SELECT q.kind, q.capture INTO k, c FROM pgoutbox.queues q WHERE q.name = dead_retry.queue;
    IF k IS NULL OR (k = 'adopted' AND c IS DISTINCT FROM 'wal') THEN
        RAISE EXCEPTION 'pgoutbox.dead_retry: no work queue or outbox named "%"', queue
            USING ERRCODE = 'undefined_table';
    END IF;
    IF c = 'wal' THEN
        FOR d IN WITH x AS (DELETE FROM pgoutbox.dead_letters x WHERE x.queue = dead_retry.queue
                                AND (dead_retry.ids IS NULL OR x.id = ANY (dead_retry.ids))
                                AND (dead_retry.topic IS NULL OR x.topic = dead_retry.topic)
                                AND (dead_retry.type IS NULL OR x.type = dead_retry.type)
                            RETURNING x.*)
                 SELECT * FROM x ORDER BY x.id LOOP
            PERFORM pg_logical_emit_message(true, 'pgoutbox:' || queue,
                jsonb_build_object('id', d.id, 'topic', d.topic, 'key', d.key, 'type', d.type,
                                   'payload', d.payload, 'headers', d.headers,
                                   'created_at', to_char(d.created_at AT TIME ZONE 'UTC',
                                                         'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text);
            RETURN NEXT d.id;
        END LOOP;
        RETURN;
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
