-- 014_caps: size caps on every field of an event, not only the payload.
--
-- Only the payload was capped (1 MiB, 001 and 004): four 100 MB headers
-- made a relay use 929 MB, and a batch that kills the relay for memory is
-- claimed again, so nothing of its topic moves.  Every queue table now
-- refuses, at INSERT (send(), enqueue(), plain INSERT and COPY alike):
--   topic    more than 256 bytes
--   type     more than 256 bytes
--   key      more than 1024 bytes
--   headers  more than 64 KiB (as stored uncompressed: a CHECK sees the
--            value before TOAST compresses it)
-- so that one event is at most about 1.1 MiB, and relay.batch_bytes
-- bounds a claim's (src/lib/relay/claim.c).  The constraints are NOT
-- VALID: rows already queued are not checked (a queue holding a larger
-- one keeps it and still relays it), new rows are.
--
-- The caps of a queue are added by a trigger on pgoutbox.queues, which
-- every queue is registered in, so that create_queue() keeps a single
-- definition (other migrations replace it).

CREATE FUNCTION pgoutbox.add_caps(q text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF to_regclass(format('pgoutbox.%I', q)) IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('ALTER TABLE pgoutbox.%I '
                   'ADD CONSTRAINT %I CHECK (octet_length(topic) <= 256) NOT VALID, '
                   'ADD CONSTRAINT %I CHECK (octet_length(type) <= 256) NOT VALID, '
                   'ADD CONSTRAINT %I CHECK (octet_length(key) <= 1024) NOT VALID, '
                   'ADD CONSTRAINT %I CHECK (pg_column_size(headers) <= 65536) NOT VALID',
                   q, left(q, 48) || '_topic_max_256', left(q, 48) || '_type_max_256',
                   left(q, 48) || '_key_max_1024', left(q, 48) || '_headers_max_64k');
END $$;
REVOKE ALL ON FUNCTION pgoutbox.add_caps(text) FROM PUBLIC;

CREATE FUNCTION pgoutbox.caps_on_new_queue() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pgoutbox.add_caps(NEW.name);
    RETURN NULL;
END $$;

CREATE TRIGGER queues_caps AFTER INSERT ON pgoutbox.queues
    FOR EACH ROW EXECUTE FUNCTION pgoutbox.caps_on_new_queue();

-- The queues that exist now.
DO $$
DECLARE
    q text;
BEGIN
    FOR q IN SELECT name FROM pgoutbox.queues ORDER BY name LOOP
        PERFORM pgoutbox.add_caps(q);
    END LOOP;
END $$;
