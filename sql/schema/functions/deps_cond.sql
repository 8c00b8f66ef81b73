-- The condition on a job (alias j of work queue queue) that its
-- dependencies (enqueue(..., depends_on)) are done: none of them is still
-- in the queue (pending, scheduled, running or retrying) or in its dead
-- letters.  A job done is deleted, so an id found in neither is done (or
-- was discarded, or never existed).  Jobs without dependencies pay for
-- the IS NULL only.  Used by the claims' dynamic SQL (work_sql, claim_ids;
-- src/lib/queue/ops.c writes the same condition).
CREATE OR REPLACE FUNCTION pgoutbox.deps_cond(queue text, j text) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('(%1$s.depends_on IS NULL OR (NOT EXISTS (SELECT FROM pgoutbox.%2$I d '
                  'WHERE d.id = ANY (%1$s.depends_on)) AND NOT EXISTS (SELECT FROM '
                  'pgoutbox.dead_letters x WHERE x.queue = %3$L AND x.id = ANY (%1$s.depends_on))))',
                  j, queue, queue)
$$;
