-- Sets a work queue's limits.  A parameter not given (NULL) keeps its
-- value; 0 removes that limit.
--   group_concurrency  jobs of one group_key running at once (1: one
--                      after the other, in order); jobs without a group
--                      are not capped.  Claims are fair across groups.
--   max_running        jobs of the queue running at once, across every
--                      worker and host (leased jobs, or the jobs of one
--                      `--sql` batch).
--   rate_per_s, burst  jobs started per second across every worker: a
--                      token bucket of `burst` tokens (by default one
--                      second's worth, at least 1), refilled at
--                      rate_per_s, taken by the claims.
-- A queue left with no limit and not paused loses its row, so that its
-- claims take the plain path again.  Wakes the workers at COMMIT.
CREATE OR REPLACE FUNCTION pgoutbox.set_queue(name text,
                                              group_concurrency integer DEFAULT NULL,
                                              max_running integer DEFAULT NULL,
                                              rate_per_s numeric DEFAULT NULL,
                                              burst integer DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c pgoutbox.queue_controls;
BEGIN
    PERFORM pgoutbox.queue_controls_check(name);
    IF (SELECT q.kind FROM pgoutbox.queues q WHERE q.name = set_queue.name) <> 'work' THEN
        RAISE EXCEPTION 'queue "%" is an outbox: limits apply to work queues only (an outbox can be paused)', name
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF group_concurrency < 0 OR max_running < 0 OR rate_per_s < 0 OR burst < 0 THEN
        RAISE EXCEPTION 'pgoutbox.set_queue: limits are 0 (none) or more'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgoutbox.queue_controls (queue) VALUES (name) ON CONFLICT DO NOTHING;
    SELECT * INTO c FROM pgoutbox.queue_controls x WHERE x.queue = set_queue.name FOR UPDATE;
    c.group_concurrency := CASE WHEN group_concurrency IS NULL THEN c.group_concurrency
                                ELSE nullif(group_concurrency, 0) END;
    c.max_running := CASE WHEN max_running IS NULL THEN c.max_running
                          ELSE nullif(max_running, 0) END;
    c.rate_per_s := CASE WHEN rate_per_s IS NULL THEN c.rate_per_s
                         ELSE nullif(rate_per_s, 0) END;
    c.burst := CASE WHEN burst IS NULL THEN c.burst ELSE nullif(burst, 0) END;
    IF NOT c.paused AND c.group_concurrency IS NULL AND c.max_running IS NULL
       AND c.rate_per_s IS NULL THEN
        DELETE FROM pgoutbox.queue_controls x WHERE x.queue = set_queue.name;
    ELSE
        UPDATE pgoutbox.queue_controls x
           SET group_concurrency = c.group_concurrency, max_running = c.max_running,
               rate_per_s = c.rate_per_s, burst = c.burst,
               tokens = least(x.tokens, coalesce(c.burst, greatest(1, ceil(c.rate_per_s)))),
               refilled_at = clock_timestamp()
         WHERE x.queue = set_queue.name;
    END IF;
    PERFORM pg_notify('pgoutbox_' || name, '');
END $$;

COMMENT ON FUNCTION pgoutbox.set_queue(text, integer, integer, numeric, integer) IS
    'Sets a work queue''s limits: group_concurrency, max_running, rate_per_s and burst (NULL keeps, 0 removes).';
