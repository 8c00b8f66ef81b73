-- Whether a queue has controls (pgoutbox.queue_controls: paused, or a
-- limit set by set_queue).  The worker's plain claim and work_sql() take
-- their own unchanged path when it is false, and pgoutbox.claim() when
-- it is true: one row looked up per claim, in the claim's own snapshot.
-- SECURITY DEFINER so that a worker role needs no grant on the controls;
-- whether a queue is steered is no secret.
CREATE OR REPLACE FUNCTION pgoutbox.queue_controlled(queue text) RETURNS boolean
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM pgoutbox.queue_controls c
                    WHERE c.queue = queue_controlled.queue)
$$;

COMMENT ON FUNCTION pgoutbox.queue_controlled(text) IS
    'Whether a work queue is paused or has limits (pgoutbox.queue_controls).';
