-- The batch producer: n events in one call, in array order; returns
-- their ids in the same order.  payloads gives n; keys, types and headers
-- are NULL (all NULL keys, '' types, '{}' headers) or arrays of n (an
-- element NULL: the same default); topics is one topic for all, or an
-- array of n.  Bad input is an error naming the first bad element (its
-- position, counted from 1), and nothing is written.  Built on
-- send_batch_args and send_batch_rows, as send_batch_to is.
CREATE OR REPLACE FUNCTION pgoutbox.send_batch(topics text[], keys text[], types text[],
                                               payloads jsonb[], headers jsonb[] DEFAULT NULL)
RETURNS bigint[]
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a producer role needs only EXECUTE
AS $$
DECLARE
    one text := pgoutbox.send_batch_args('send_batch', topics, keys, types, payloads, headers);
    ids bigint[];
BEGIN
    IF cardinality(payloads) = 0 THEN
        RETURN '{}';
    END IF;
    WITH ins AS (
        INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
        SELECT r.topic, r.key, r.type, r.payload, r.header
          FROM pgoutbox.send_batch_rows(payloads, keys, types, headers, topics, one) r
         ORDER BY r.i
        RETURNING id
    )
    SELECT array_agg(id ORDER BY id) INTO ids FROM ins;
    RETURN ids;
END $$;

COMMENT ON FUNCTION pgoutbox.send_batch(text[], text[], text[], jsonb[], jsonb[]) IS
    'Writes events into the outbox inside the caller''s transaction, one per payload; returns their ids in order.';

CREATE OR REPLACE FUNCTION pgoutbox.send_batch(topic text, keys text[], types text[],
                                    payloads jsonb[], headers jsonb[] DEFAULT NULL)
RETURNS bigint[]
LANGUAGE sql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pgoutbox.send_batch(ARRAY[topic], keys, types, payloads, headers)
$$;

COMMENT ON FUNCTION pgoutbox.send_batch(text, text[], text[], jsonb[], jsonb[]) IS
    'send_batch with one topic for every event.';
