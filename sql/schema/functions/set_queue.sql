-- Sets a queue's limits.  A parameter not given (NULL) keeps its
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
--   fair               claims fair across groups without a limit: a work
--                      queue's groups (its claims go through claim_ids),
--                      an outbox's keys (its concurrent relays' claims
--                      take keys round-robin, src/lib/relay/claim.c,
--                      from the index <queue>_fair on (key, id), partial
--                      on key IS NOT NULL, made here and dropped with
--                      fair => false; a relay reads the setting when it
--                      starts).
-- An outbox captured in its table takes fair only; the limits are a
-- work queue's.  One captured through the WAL takes neither.  A queue left with no limit, not fair and not paused
-- loses its row, so that its claims take the plain path again.  Wakes
-- the workers at COMMIT.
CREATE OR REPLACE FUNCTION pgoutbox.set_queue(name text,
                                              group_concurrency integer DEFAULT NULL,
                                              max_running integer DEFAULT NULL,
                                              rate_per_s numeric DEFAULT NULL,
                                              burst integer DEFAULT NULL,
                                              fair boolean DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c pgoutbox.queue_controls;
    outbox boolean;
BEGIN
    IF EXISTS (SELECT FROM pgoutbox.queues q WHERE q.name = set_queue.name AND q.capture = 'wal') THEN
        RAISE EXCEPTION 'queue "%" is an outbox captured through the WAL: its relay streams a replication slot, with no claims to make fair or limit', name
            USING ERRCODE = 'wrong_object_type';
    END IF;
    PERFORM pgoutbox.queue_controls_check(name);
    outbox := (SELECT q.kind FROM pgoutbox.queues q WHERE q.name = set_queue.name) <> 'work';
    IF outbox AND (group_concurrency IS NOT NULL OR max_running IS NOT NULL
                   OR rate_per_s IS NOT NULL OR burst IS NOT NULL) THEN
        RAISE EXCEPTION 'queue "%" is an outbox: limits apply to work queues only (an outbox can be paused, or made fair with fair => true)', name
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
    c.fair := coalesce(fair, c.fair);
    IF outbox AND c.fair AND to_regclass(format('pgoutbox.%I', name || '_fair')) IS NULL THEN
        EXECUTE format('CREATE INDEX %I ON pgoutbox.%I (key, id) WHERE key IS NOT NULL',
                       name || '_fair', name);
    ELSIF outbox AND NOT c.fair AND to_regclass(format('pgoutbox.%I', name || '_fair')) IS NOT NULL THEN
        EXECUTE format('DROP INDEX pgoutbox.%I', name || '_fair');
    END IF;
    IF NOT c.paused AND c.group_concurrency IS NULL AND c.max_running IS NULL
       AND c.rate_per_s IS NULL AND NOT c.fair THEN
        DELETE FROM pgoutbox.queue_controls x WHERE x.queue = set_queue.name;
    ELSE
        UPDATE pgoutbox.queue_controls x
           SET group_concurrency = c.group_concurrency, max_running = c.max_running,
               rate_per_s = c.rate_per_s, burst = c.burst, fair = c.fair,
               tokens = least(x.tokens, coalesce(c.burst, greatest(1, ceil(c.rate_per_s)))),
               refilled_at = clock_timestamp()
         WHERE x.queue = set_queue.name;
    END IF;
    PERFORM pg_notify('pgoutbox_' || name, '');
END $$;

COMMENT ON FUNCTION pgoutbox.set_queue(text, integer, integer, numeric, integer, boolean) IS
    'Sets a queue''s limits: group_concurrency, max_running, rate_per_s and burst (NULL keeps, 0 removes); fair claims across groups (an outbox''s keys).';
