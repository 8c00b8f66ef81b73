-- send_to()'s other half (functions/send_to.sql): a queue captured by
-- its table (a row each; the outbox through send()), and every call
-- send_to() does not take itself: a queue that does not exist or is not
-- an outbox, and arguments that fail a check, each with its error.
-- Another queue's INSERT names its table, so it is planned at each call
-- (EXECUTE).  Not granted to anyone: send_to() calls it as its owner.
CREATE OR REPLACE FUNCTION pgoutbox.send_to_table(queue text, topic text, key text, type text, payload jsonb,
                                 headers jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    new_id  bigint;
    capture text;
BEGIN
    capture := pgoutbox.outbox_capture('send_to', queue);
    IF queue = 'outbox' THEN
        RETURN pgoutbox.send(topic, key, type, payload, headers);
    END IF;
    -- send()'s checks (001), with this function's name.
    IF topic IS NULL OR topic = '' THEN
        RAISE EXCEPTION 'pgoutbox.send_to: topic must not be empty'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.send_to: payload must not be NULL (use ''null''::jsonb)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_column_size(payload) > 1048576 THEN
        RAISE EXCEPTION 'pgoutbox.send_to: payload is % bytes, the limit is 1048576',
            pg_column_size(payload) USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN
        RAISE EXCEPTION 'pgoutbox.send_to: headers must be a JSON object, not %',
            jsonb_typeof(headers) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF capture = 'wal' THEN
        RAISE EXCEPTION 'pgoutbox.send_to: queue % is captured through the WAL, but its sequence pgoutbox.%$wal is missing', queue, queue
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Run pgoutbox migrate, which names the sequence of every WAL queue <queue>$wal.';
    END IF;
    EXECUTE format('INSERT INTO pgoutbox.%I (topic, key, type, payload, headers) '
                   'VALUES ($1, $2, $3, $4, $5) RETURNING id', queue)
        INTO new_id USING topic, key, coalesce(type, ''), payload, coalesce(headers, '{}');
    RETURN new_id;
END $$;

COMMENT ON FUNCTION pgoutbox.send_to_table(text, text, text, text, jsonb, jsonb) IS
    'send_to() into a queue captured by its table, and send_to()''s errors.';
