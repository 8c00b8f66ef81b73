-- Raises the error for a queue that a producer may not send to: none of
-- that name, a work queue, an adopted table.  fn names the caller.
CREATE OR REPLACE FUNCTION pgoutbox.outbox_check(fn text, queue text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    SELECT x.kind INTO k FROM pgoutbox.queues x WHERE x.name = outbox_check.queue;
    IF k IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.%: no outbox queue named "%" in this database', fn, queue
            USING ERRCODE = 'undefined_object',
                  HINT = format('Create it with SELECT pgoutbox.create_queue(%L, 64, ''outbox'') or `pgoutbox queue create --kind outbox %s`.',
                                queue, queue);
    ELSIF k = 'work' THEN
        RAISE EXCEPTION 'pgoutbox.%: queue "%" is a work queue, not an outbox: enqueue its jobs with pgoutbox.enqueue(''%'', payload)',
            fn, queue, queue USING ERRCODE = 'wrong_object_type';
    ELSIF k <> 'outbox' THEN
        RAISE EXCEPTION 'pgoutbox.%: queue "%" is an adopted table (%), not an outbox of pgoutbox: write its rows into that table',
            fn, queue, k USING ERRCODE = 'wrong_object_type';
    END IF;
END $$;
