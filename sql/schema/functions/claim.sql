-- Lease mode's claim of a queue with controls (pause, limits, groups):
-- the jobs pgoutbox.claim_ids() picks, leased to worker for lease_ms as
-- the plain claim leases them (src/lib/queue/ops.c: epoch + 1, attempts
-- + 1).  The worker's claim statement calls it only when the queue has a
-- row in pgoutbox.queue_controls; it runs with the worker's rights on
-- the queue (the worker role needs EXECUTE on claim_ids as well).
CREATE OR REPLACE FUNCTION pgoutbox.claim(queue text, worker text, lease_ms bigint,
                                          lim integer, max_attempts integer)
RETURNS TABLE (id bigint, epoch bigint, attempts integer, topic text, key text,
               payload jsonb)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY EXECUTE format(
        'UPDATE pgoutbox.%I j SET locked_by = $1, '
        'locked_until = now() + $2 * interval ''1 millisecond'', '
        'epoch = j.epoch + 1, attempts = j.attempts + 1 '
        'WHERE j.id = ANY ($3) '
        'RETURNING j.id, j.epoch, j.attempts, j.topic::text, j.key::text, j.payload::jsonb', queue)
        USING worker, lease_ms, pgoutbox.claim_ids(queue, lim, max_attempts);
END $$;

COMMENT ON FUNCTION pgoutbox.claim(text, text, bigint, integer, integer) IS
    'Leases the jobs of a queue with controls that claim_ids() picks to worker for lease_ms.';
