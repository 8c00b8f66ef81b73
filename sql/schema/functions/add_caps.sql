-- The shape of a queue table, given to every queue when it is registered
-- in pgoutbox.queues (the trigger queues_caps, through caps_on_new_queue):
-- its field checks dropped (every CHECK on topic, key, type, payload and
-- headers alone), the columns as the event domains, no shard column.
-- create_queue() makes its table the older way, and this reshapes it
-- while it is empty.  (The name is that of the caps it once added.)
CREATE OR REPLACE FUNCTION pgoutbox.add_caps(q text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tbl regclass := to_regclass(format('pgoutbox.%I', q));
    c name;
BEGIN
    IF tbl IS NULL THEN
        RETURN;
    END IF;
    FOR c IN
        SELECT k.conname FROM pg_constraint k
         WHERE k.conrelid = tbl AND k.contype = 'c'
           AND k.conkey <@ ARRAY(SELECT a.attnum FROM pg_attribute a
                                  WHERE a.attrelid = tbl
                                    AND a.attname IN ('topic', 'key', 'type', 'payload', 'headers'))
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', tbl, c);
    END LOOP;
    EXECUTE format('ALTER TABLE %s DROP COLUMN IF EXISTS shard, '
                   'ALTER COLUMN topic TYPE pgoutbox.event_topic, '
                   'ALTER COLUMN key TYPE pgoutbox.event_key, '
                   'ALTER COLUMN type TYPE pgoutbox.event_type, '
                   'ALTER COLUMN payload TYPE pgoutbox.event_payload, '
                   'ALTER COLUMN headers TYPE pgoutbox.event_headers', tbl);
END $$;
