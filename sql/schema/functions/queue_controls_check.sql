-- The queue that pause(), resume() and set_queue() are asked to steer: a
-- work queue, or for pause() and resume() an outbox captured in its
-- table (its relays' claims read the pause); else an error saying what
-- it is.  set_queue() refuses outboxes itself.
CREATE OR REPLACE FUNCTION pgoutbox.queue_controls_check(queue text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    cap text;
BEGIN
    SELECT q.kind, q.capture INTO k, cap FROM pgoutbox.queues q
     WHERE q.name = queue_controls_check.queue;
    IF k IS NULL THEN
        RAISE EXCEPTION 'no queue named "%" (pgoutbox queue list shows them)', queue
            USING ERRCODE = 'undefined_table';
    ELSIF k = 'outbox' AND cap = 'wal' THEN
        RAISE EXCEPTION 'queue "%" is an outbox captured through the WAL: its relay streams a replication slot and cannot be paused (stop the relay instead)', queue
            USING ERRCODE = 'wrong_object_type';
    ELSIF k NOT IN ('work', 'outbox') THEN
        RAISE EXCEPTION 'queue "%" is an % queue: pause applies to work queues and outboxes, limits to work queues', queue, k
            USING ERRCODE = 'wrong_object_type';
    END IF;
END $$;
