-- send_batch() into queue: the same arguments after the queue, the same
-- checks and errors, the ids in input order; nothing of the call is
-- written when anything is wrong.  The outbox goes through send_batch().
-- A queue with capture wal: one logical message per event, in input
-- order, as send_to() writes them, their ids from the queue's sequence
-- pgoutbox.<queue>$wal.
CREATE OR REPLACE FUNCTION pgoutbox.send_batch_to(queue text, topics text[], keys text[], types text[],
                                       payloads jsonb[], headers jsonb[] DEFAULT NULL)
RETURNS bigint[]
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a producer role needs only EXECUTE
AS $$
DECLARE
    one     text;
    ids     bigint[];
    capture text;
    r       record;
    id      bigint;
BEGIN
    capture := pgoutbox.outbox_capture('send_batch_to', queue);
    IF queue = 'outbox' THEN
        RETURN pgoutbox.send_batch(topics, keys, types, payloads, headers);
    END IF;
    one := pgoutbox.send_batch_args('send_batch_to', topics, keys, types, payloads, headers);
    IF cardinality(payloads) = 0 THEN
        RETURN '{}';
    END IF;
    IF capture = 'wal' THEN
        ids := '{}';
        FOR r IN SELECT * FROM pgoutbox.send_batch_rows(payloads, keys, types, headers, topics, one) x
                 ORDER BY x.i LOOP
            id := nextval(format('pgoutbox.%I', queue || '$wal')::regclass);
            PERFORM pg_logical_emit_message(true, 'pgoutbox:' || queue,
                pgoutbox.wal_envelope(id, r.topic, r.key, r.type, r.payload, r.header));
            ids := ids || id;
        END LOOP;
        RETURN ids;
    END IF;
    EXECUTE format('WITH ins AS (INSERT INTO pgoutbox.%I (topic, key, type, payload, headers) '
                   'SELECT r.topic, r.key, r.type, r.payload, r.header '
                   'FROM pgoutbox.send_batch_rows($1, $2, $3, $4, $5, $6) r ORDER BY r.i '
                   'RETURNING id) SELECT array_agg(id ORDER BY id) FROM ins', queue)
        INTO ids USING payloads, keys, types, headers, topics, one;
    RETURN ids;
END $$;

COMMENT ON FUNCTION pgoutbox.send_batch_to(text, text[], text[], text[], jsonb[], jsonb[]) IS
    'send_batch into the outbox queue queue; returns the ids in input order.';

CREATE OR REPLACE FUNCTION pgoutbox.send_batch_to(queue text, topic text, keys text[], types text[],
                                       payloads jsonb[], headers jsonb[] DEFAULT NULL)
RETURNS bigint[]
LANGUAGE sql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pgoutbox.send_batch_to(queue, ARRAY[topic], keys, types, payloads, headers)
$$;

COMMENT ON FUNCTION pgoutbox.send_batch_to(text, text, text[], text[], jsonb[], jsonb[]) IS
    'send_batch_to with one topic for every event.';
