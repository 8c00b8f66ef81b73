-- The producer API for an outbox queue: send() into queue.  Call it
-- inside your transaction; it returns the event's id.  A queue that does
-- not exist or is not an outbox is an error, and nothing is written.
--
-- A queue with capture wal (docs/wal.md) gets no row: the event is a
-- transactional logical message with the prefix pgoutbox:<queue>,
-- decoded at commit and never if the transaction rolls back.  Its
-- content is the event's envelope as JSON: id, topic, key, type, payload
-- and headers (the relay gives it the transaction's commit time as
-- created_at).  Its id is the next value of the queue's sequence
-- pgoutbox.<queue>$wal: unique, and the same in every redelivery of the
-- message, for the inbox and the brokers' dedup.
--
-- Both paths are producers' hot paths, and PL/pgSQL builds the state of
-- each expression it evaluates once per transaction, so each path
-- evaluates few, small ones.  No SET clause: a WAL queue is known by its
-- sequence's name (a catalog cache probe, no query), and its event is one
-- expression.  An argument that fails a check, on either path, goes to
-- send_to_refused(), which raises the error.  The event domains check the
-- caps, as the columns of a table queue do.  The id: nextval() in the
-- WHEN, currval() in the THEN that only runs after it.  A table queue
-- (or one that does not exist) takes the statements after the IF: its
-- row, or the error.  As in send() (see send.sql), everything named is
-- qualified, since the caller's search path applies; the INSERT names
-- its table with its schema.
CREATE OR REPLACE FUNCTION pgoutbox.send_to(queue text, topic text, key text, type text, payload jsonb,
                                 headers jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER  -- a producer role needs only EXECUTE
AS $$
DECLARE
    new_id  bigint;
    capture text;
BEGIN
    IF pg_catalog.to_regclass('pgoutbox.' OPERATOR(pg_catalog.||)
           pg_catalog.quote_ident(queue OPERATOR(pg_catalog.||) '$wal')) IS NOT NULL THEN
        RETURN CASE
            WHEN topic IS NULL OR topic OPERATOR(pg_catalog.=) '' OR payload IS NULL
                 OR pg_catalog.pg_column_size(payload) OPERATOR(pg_catalog.>) 1048576
                 OR (headers IS NOT NULL
                     AND pg_catalog.jsonb_typeof(headers) OPERATOR(pg_catalog.<>) 'object')
            THEN pgoutbox.send_to_refused(queue, topic, payload, headers)
            WHEN pg_catalog.pg_logical_emit_message(true, 'pgoutbox:' OPERATOR(pg_catalog.||) queue,
                     '{"id":' OPERATOR(pg_catalog.||)
                     pg_catalog.nextval(('pgoutbox.' OPERATOR(pg_catalog.||)
                         pg_catalog.quote_ident(queue OPERATOR(pg_catalog.||) '$wal'))::pg_catalog.regclass)
                     OPERATOR(pg_catalog.||) ',"topic":' OPERATOR(pg_catalog.||)
                     pg_catalog.to_json(topic::pgoutbox.event_topic)::pg_catalog.text
                     OPERATOR(pg_catalog.||) ',"key":' OPERATOR(pg_catalog.||)
                     COALESCE(pg_catalog.to_json(key::pgoutbox.event_key)::pg_catalog.text, 'null')
                     OPERATOR(pg_catalog.||) ',"type":' OPERATOR(pg_catalog.||)
                     pg_catalog.to_json(COALESCE(type, '')::pgoutbox.event_type)::pg_catalog.text
                     OPERATOR(pg_catalog.||) ',"payload":' OPERATOR(pg_catalog.||)
                     payload::pgoutbox.event_payload::pg_catalog.text
                     OPERATOR(pg_catalog.||) ',"headers":' OPERATOR(pg_catalog.||)
                     COALESCE(headers, '{}')::pgoutbox.event_headers::pg_catalog.text
                     OPERATOR(pg_catalog.||) '}') IS NOT NULL
            THEN pg_catalog.currval(('pgoutbox.' OPERATOR(pg_catalog.||)
                     pg_catalog.quote_ident(queue OPERATOR(pg_catalog.||) '$wal'))::pg_catalog.regclass)
        END;
    END IF;
    capture := pgoutbox.outbox_capture('send_to', queue);
    IF queue OPERATOR(pg_catalog.=) 'outbox' THEN
        RETURN pgoutbox.send(topic, key, type, payload, headers);
    END IF;
    -- send()'s checks (001), in one test: send_to_refused() raises the
    -- failed one's error, with this function's name.
    IF topic IS NULL OR topic OPERATOR(pg_catalog.=) '' OR payload IS NULL
       OR pg_catalog.pg_column_size(payload) OPERATOR(pg_catalog.>) 1048576
       OR (headers IS NOT NULL
           AND pg_catalog.jsonb_typeof(headers) OPERATOR(pg_catalog.<>) 'object') THEN
        RETURN pgoutbox.send_to_refused(queue, topic, payload, headers);
    END IF;
    IF capture OPERATOR(pg_catalog.=) 'wal' THEN
        RAISE EXCEPTION 'pgoutbox.send_to: queue % is captured through the WAL, but its sequence pgoutbox.%$wal is missing', queue, queue
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Run pgoutbox migrate, which names the sequence of every WAL queue <queue>$wal.';
    END IF;
    EXECUTE pg_catalog.format('INSERT INTO pgoutbox.%I (topic, key, type, payload, headers) '
                              'VALUES ($1, $2, $3, $4, $5) RETURNING id', queue)
        INTO new_id USING topic, key, COALESCE(type, ''), payload, COALESCE(headers, '{}');
    RETURN new_id;
END $$;

COMMENT ON FUNCTION pgoutbox.send_to(text, text, text, text, jsonb, jsonb) IS
    'Writes an event into the outbox queue queue inside the caller''s transaction; returns its id.';
