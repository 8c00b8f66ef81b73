-- The kind of a queue ('outbox' or 'work'; NULL when there is none), for
-- the runners' check at start: a relay refuses a work queue (it would
-- publish and delete its jobs), a worker the outbox.  Their roles need no
-- grant on pgoutbox.queues for it; a queue's kind is no secret.
CREATE OR REPLACE FUNCTION pgoutbox.queue_kind(queue text) RETURNS text
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT q.kind FROM pgoutbox.queues q WHERE q.name = queue_kind.queue
$$;
