-- Whether the jobs a job depends on (enqueue(..., depends_on)) are done:
-- none of them is still in work queue queue (pending, scheduled, running
-- or retrying) or in its dead letters.  A job done is deleted, so an id
-- found in neither is done (or was discarded, or never existed).  The
-- claims call it only for a job that has dependencies (deps_cond), so a
-- claim of jobs without any plans no subquery for them.
CREATE OR REPLACE FUNCTION pgoutbox.deps_done(queue text, depends_on bigint[])
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    waiting boolean;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT FROM pgoutbox.%I d WHERE d.id = ANY ($1))', queue)
        INTO waiting USING depends_on;
    IF waiting THEN
        RETURN false;
    END IF;
    RETURN NOT EXISTS (SELECT FROM pgoutbox.dead_letters x
                        WHERE x.queue = deps_done.queue AND x.id = ANY (deps_done.depends_on));
END $$;
