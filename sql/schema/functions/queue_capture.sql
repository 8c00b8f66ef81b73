-- How a queue captures its events ('table' or 'wal'; NULL when there is
-- none), for the C producer (src/lib/outbox/producer.c): a queue
-- captured through the WAL gets no row, so a role that may INSERT into
-- its (empty) table must still go through send_to().  Like queue_kind(),
-- callable by any role.
CREATE OR REPLACE FUNCTION pgoutbox.queue_capture(queue text) RETURNS text
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT q.capture FROM pgoutbox.queues q WHERE q.name = queue_capture.queue
$$;
