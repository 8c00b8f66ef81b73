-- 015_send_fast: producers notify only when a relay may be asleep, and a
-- batch producer for any language.
--
-- NOTIFY takes one lock per database at commit and holds it until the
-- commit is done, so notifying transactions commit one after the other
-- and no longer share WAL flushes: with 8 clients, send() ran at a
-- quarter of a plain INSERT (issue 17).  The outbox's trigger now sends
-- its NOTIFY only when a relay may be asleep.
--
-- The handshake, on one advisory lock per queue (pgoutbox.wake_ns(queue),
-- 0), the "sleeper lock":
--   * A producer's statement trigger tries the lock in SHARE mode for the
--     rest of its transaction, without waiting.  Granted: every relay is
--     awake, no NOTIFY.  Refused: some relay holds the lock or waits for
--     it (PostgreSQL refuses a conditional request that conflicts with a
--     waiter as well as with a holder), so NOTIFY as before.
--   * A relay about to sleep asks for the lock in EXCLUSIVE mode on a
--     connection of its own, waiting.  From that moment every producer
--     notifies.  The lock is granted once every producer that took it in
--     SHARE mode before has ended; a transaction's locks go only after its
--     commit is visible, so each row written without a NOTIFY is visible
--     to any snapshot taken after the grant.  The same statement sends one
--     NOTIFY after the grant: every relay of the queue claims once more
--     (the re-check), then sleeps on LISTEN with the lock held.
--   * A relay that finds work again releases the lock; producers go quiet
--     while it is busy, and it claims again after every claim that
--     returned rows, until one comes back empty.
-- So a commit that did not notify is either seen by a claim that follows
-- it, or its producer still holds the lock in SHARE mode when a relay
-- falls asleep, and the relay's re-check follows its commit.  A relay
-- whose sleeper connection is gone polls often until it is back (its
-- session lock went with it).
--
-- Work queues keep notify_outbox(): their workers do not take the lock.

-- The advisory-lock namespace of a queue's sleeper lock (first key; the
-- second is 0).
CREATE FUNCTION pgoutbox.wake_ns(queue text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtext('pgoutbox.wake.' || queue)
$$;

CREATE FUNCTION pgoutbox.wake_relay() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Runs as the producer, with its search_path: the catalog's own
    -- functions by name.
    IF NOT pg_catalog.pg_try_advisory_xact_lock_shared(
               pg_catalog.hashtext('pgoutbox.wake.' || TG_TABLE_NAME), 0) THEN
        PERFORM pg_catalog.pg_notify('pgoutbox_' || TG_TABLE_NAME, '');
    END IF;
    RETURN NULL;
END $$;

COMMENT ON FUNCTION pgoutbox.wake_relay() IS
    'Statement trigger of the outbox: NOTIFY only while a relay holds or awaits its sleeper lock (see the migration send_fast).';

DROP TRIGGER outbox_notify ON pgoutbox.outbox;
CREATE TRIGGER outbox_notify AFTER INSERT ON pgoutbox.outbox
    FOR EACH STATEMENT EXECUTE FUNCTION pgoutbox.wake_relay();

-- Raised from inside the batch INSERT for the first bad element, so that
-- the statement (and nothing else) is the unit that fails.  Returns text
-- only to fit where it is called; it never returns.
CREATE FUNCTION pgoutbox.send_batch_error(what text, i bigint, detail text,
                                          code text DEFAULT '22023')
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'pgoutbox.send_batch: %[%] %', what, i, detail
        USING ERRCODE = code;
END $$;

-- The batch producer: n events in one call, in array order; returns
-- their ids in the same order.  payloads gives n; keys, types and headers
-- are NULL (all NULL keys, '' types, '{}' headers) or arrays of n (an
-- element NULL: the same default); topics is one topic for all, or an
-- array of n.  Bad input is an error naming the first bad element (its
-- position, counted from 1), and nothing is written.
CREATE FUNCTION pgoutbox.send_batch(topics text[], keys text[], types text[],
                                    payloads jsonb[], headers jsonb[] DEFAULT NULL)
RETURNS bigint[]
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a producer role needs only EXECUTE (pg_temp last: 011_hardening)
AS $$
DECLARE
    n integer := cardinality(payloads);
    one text;  -- the topic of every event, when only one is given
    ids bigint[];
BEGIN
    IF payloads IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.send_batch: payloads must not be NULL'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_ndims(payloads) > 1 OR array_ndims(topics) > 1 OR array_ndims(keys) > 1
       OR array_ndims(types) > 1 OR array_ndims(headers) > 1 THEN
        RAISE EXCEPTION 'pgoutbox.send_batch: arrays must have one dimension'
            USING ERRCODE = 'array_subscript_error';
    END IF;
    IF topics IS NULL OR cardinality(topics) NOT IN (1, n) THEN
        RAISE EXCEPTION 'pgoutbox.send_batch: % topics for % payloads: give one topic or one per payload',
            coalesce(cardinality(topics), 0), n USING ERRCODE = 'array_subscript_error';
    END IF;
    IF cardinality(keys) <> n OR cardinality(types) <> n OR cardinality(headers) <> n THEN
        RAISE EXCEPTION 'pgoutbox.send_batch: % payloads but % keys, % types, % headers: each array must have one element per payload (or be NULL)',
            n, coalesce(cardinality(keys)::text, 'NULL'), coalesce(cardinality(types)::text, 'NULL'),
            coalesce(cardinality(headers)::text, 'NULL') USING ERRCODE = 'array_subscript_error';
    END IF;
    IF n = 0 THEN
        RETURN '{}';
    END IF;
    IF cardinality(topics) = 1 THEN
        one := topics[array_lower(topics, 1)];
        IF one IS NULL OR one = '' THEN
            RAISE EXCEPTION 'pgoutbox.send_batch: topics[1] is empty or NULL'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        topics := NULL;
    END IF;
    -- One statement: a bad element raises from inside it, so no row of
    -- the batch stays.  unnest() of several arrays walks them side by
    -- side (a NULL array gives NULLs).
    WITH ins AS (
        INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
        SELECT CASE WHEN one IS NOT NULL THEN one
                    WHEN p.topic IS NULL OR p.topic = ''
                    THEN pgoutbox.send_batch_error('topics', p.i, 'is empty or NULL')
                    ELSE p.topic END,
               p.key,
               coalesce(p.type, ''),
               CASE WHEN p.payload IS NULL
                    THEN pgoutbox.send_batch_error('payloads', p.i, 'is NULL (use ''null''::jsonb)')::jsonb
                    WHEN pg_column_size(p.payload) > 1048576
                    THEN pgoutbox.send_batch_error('payloads', p.i,
                             format('is %s bytes, the limit is 1048576', pg_column_size(p.payload)),
                             '54000')::jsonb
                    ELSE p.payload END,
               CASE WHEN p.header IS NULL THEN '{}'
                    WHEN jsonb_typeof(p.header) <> 'object'
                    THEN pgoutbox.send_batch_error('headers', p.i,
                             format('must be a JSON object, not %s', jsonb_typeof(p.header)))::jsonb
                    ELSE p.header END
          FROM unnest(payloads, keys, types, headers, topics)
               WITH ORDINALITY AS p(payload, key, type, header, topic, i)
         ORDER BY p.i
        RETURNING id
    )
    SELECT array_agg(id ORDER BY id) INTO ids FROM ins;
    RETURN ids;
END $$;

CREATE FUNCTION pgoutbox.send_batch(topic text, keys text[], types text[],
                                    payloads jsonb[], headers jsonb[] DEFAULT NULL)
RETURNS bigint[]
LANGUAGE sql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pgoutbox.send_batch(ARRAY[topic], keys, types, payloads, headers)
$$;

COMMENT ON FUNCTION pgoutbox.send_batch(text[], text[], text[], jsonb[], jsonb[]) IS
    'Writes events into the outbox inside the caller''s transaction, one per payload; returns their ids in order.';
COMMENT ON FUNCTION pgoutbox.send_batch(text, text[], text[], jsonb[], jsonb[]) IS
    'send_batch with one topic for every event.';

-- Least privilege, as for send(): granted per role.
REVOKE ALL ON FUNCTION pgoutbox.send_batch(text[], text[], text[], jsonb[], jsonb[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_batch(text, text[], text[], jsonb[], jsonb[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_batch_error(text, bigint, text, text) FROM PUBLIC;
