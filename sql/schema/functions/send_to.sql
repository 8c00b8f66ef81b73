-- The producer API for an outbox queue: send() into queue.  Call it
-- inside your transaction; it returns the event's id.  A queue that does
-- not exist or is not an outbox is an error, and nothing is written.
-- The outbox itself goes through send() (its checks, its plan); another
-- queue's INSERT names its table, so it is planned at each call
-- (EXECUTE).
--
-- A queue with capture wal (docs/wal.md) gets no row: the event, as the
-- envelope the relay hands its sink (id, topic, key, type, payload,
-- headers, created_at), is a transactional logical message with the
-- prefix pgoutbox:<queue>, decoded at commit and never if the
-- transaction rolls back.  Its id is the next value of the queue's own
-- sequence (that of its empty table): unique, and the same in every
-- redelivery of the message, for the inbox and the brokers' dedup.
-- Which capture is read with the queue's kind, in the one lookup.
CREATE OR REPLACE FUNCTION pgoutbox.send_to(queue text, topic text, key text, type text, payload jsonb,
                                 headers jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a producer role needs only EXECUTE
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
        new_id := nextval(format('pgoutbox.%I', queue || '_id_seq')::regclass);
        PERFORM pg_logical_emit_message(true, 'pgoutbox:' || queue,
            pgoutbox.wal_envelope(new_id, topic, key, type, payload, headers));
        RETURN new_id;
    END IF;
    EXECUTE format('INSERT INTO pgoutbox.%I (topic, key, type, payload, headers) '
                   'VALUES ($1, $2, $3, $4, $5) RETURNING id', queue)
        INTO new_id USING topic, key, coalesce(type, ''), payload, coalesce(headers, '{}');
    RETURN new_id;
END $$;

COMMENT ON FUNCTION pgoutbox.send_to(text, text, text, text, jsonb, jsonb) IS
    'Writes an event into the outbox queue queue inside the caller''s transaction; returns its id.';
