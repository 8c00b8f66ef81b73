-- outbox_check() for the producers of a named queue, returning how the
-- queue captures its events: 'table' (a row each) or 'wal' (a logical
-- message each, docs/wal.md).  The same one lookup of pgoutbox.queues as
-- outbox_check(), so that the capture mode costs send_to() nothing more
-- than the check it always made.
CREATE OR REPLACE FUNCTION pgoutbox.outbox_capture(fn text, queue text) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    c text;
BEGIN
    SELECT x.kind, x.capture INTO k, c FROM pgoutbox.queues x WHERE x.name = outbox_capture.queue;
    IF k IS DISTINCT FROM 'outbox' THEN
        PERFORM pgoutbox.outbox_check(fn, queue);  -- raises its error
    END IF;
    RETURN c;
END $$;
