-- The condition on a job (alias j of work queue queue) that its
-- dependencies (enqueue(..., depends_on)) are done: none of them is still
-- in the queue (pending, scheduled, running or retrying) or in its dead
-- letters.  A job done is deleted, so an id found in neither is done (or
-- was discarded, or never existed).  Jobs without dependencies pay for
-- the IS NULL only: the rest is deps_done(), a function call, so that a
-- claim (planned again at every batch through EXECUTE) plans no
-- subquery for it.  Used by the claims' dynamic SQL (work_sql,
-- claim_ids; src/lib/queue/ops.c writes the same condition).
CREATE OR REPLACE FUNCTION pgoutbox.deps_cond(queue text, j text) RETURNS text
LANGUAGE sql IMMUTABLE  -- no SET clause: inlined into each claim's call
AS $$
    SELECT pg_catalog.format('(%1$s.depends_on IS NULL OR pgoutbox.deps_done(%2$L, %1$s.depends_on))',
                  j, queue)
$$;
