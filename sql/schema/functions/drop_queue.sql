-- Drops an outbox queue of its own (kind outbox, not the outbox itself):
-- its table (and its archive, if any), its shard leases and relay rows,
-- its row in pgoutbox.queues, and for a queue captured through the WAL
-- its replication slot (docs/wal.md), which would otherwise keep WAL for
-- ever.  Its events not yet relayed are dropped with it; its dead
-- letters stay.  The slot goes last: a slot a relay still streams
-- refuses, and then nothing of the call is done (stop the relays first).
-- Work queues and adopted tables are refused (cron schedules and the
-- application's tables may name them).
CREATE OR REPLACE FUNCTION pgoutbox.drop_queue(name text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q text := drop_queue.name;
    k text;
    c text;
BEGIN
    SELECT x.kind, x.capture INTO k, c FROM pgoutbox.queues x WHERE x.name = q FOR UPDATE;
    IF k IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.drop_queue: no queue named "%"', q USING ERRCODE = 'undefined_object';
    END IF;
    IF k <> 'outbox' OR q = 'outbox' THEN
        RAISE EXCEPTION 'pgoutbox.drop_queue: queue "%" is %: only an outbox queue of its own is dropped here',
            q, CASE WHEN q = 'outbox' THEN 'the outbox itself' ELSE 'a ' || k || ' queue' END
            USING ERRCODE = 'wrong_object_type';
    END IF;
    EXECUTE format('DROP TABLE IF EXISTS pgoutbox.%I', q);
    EXECUTE format('DROP TABLE IF EXISTS pgoutbox.%I CASCADE', q || '_archive');
    DELETE FROM pgoutbox.shard_leases l WHERE l.queue = q;
    DELETE FROM pgoutbox.relays r WHERE r.queue = q;
    DELETE FROM pgoutbox.queues x WHERE x.name = q;
    IF c = 'wal' AND EXISTS (SELECT 1 FROM pg_replication_slots s
                              WHERE s.slot_name = 'pgoutbox_' || q AND s.database = current_database()) THEN
        PERFORM pg_drop_replication_slot('pgoutbox_' || q);
    END IF;
END $$;

COMMENT ON FUNCTION pgoutbox.drop_queue(text) IS
    'Drops an outbox queue of its own: its table, leases, registration and, for capture wal, its replication slot.';
