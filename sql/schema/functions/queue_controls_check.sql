-- The queue that pause(), resume() and set_queue() are asked to steer:
-- a work queue, else an error saying what it is.
CREATE OR REPLACE FUNCTION pgoutbox.queue_controls_check(queue text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    SELECT q.kind INTO k FROM pgoutbox.queues q WHERE q.name = queue_controls_check.queue;
    IF k IS NULL THEN
        RAISE EXCEPTION 'no queue named "%" (pgoutbox queue list shows them)', queue
            USING ERRCODE = 'undefined_table';
    ELSIF k <> 'work' THEN
        RAISE EXCEPTION 'queue "%" is an % queue: pause and limits apply to work queues only', queue, k
            USING ERRCODE = 'wrong_object_type';
    END IF;
END $$;
