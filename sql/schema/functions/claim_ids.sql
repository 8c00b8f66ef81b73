-- The jobs a claim of a queue with controls may take now, locked (FOR
-- UPDATE SKIP LOCKED) in the caller's transaction: nothing while paused;
-- at most lim, max_running less the jobs running, the tokens of the rate
-- bucket (taken here); fair across groups: each group with room gives
-- its first ready job (priority DESC, id) before any gives a second, and
-- never more than group_concurrency less its running jobs.  Jobs without
-- a group_key form one group with no cap, taken from the head of the
-- queue (the first 4 * lim ready jobs in the plain claim's order): the
-- queue's index of groups leaves them out, so that plain enqueues pay
-- for no index of their own.  A job whose dependencies are not done
-- (deps_cond) is not taken.
--
-- The claims of one queue with controls take its controls row FOR
-- UPDATE, one after the other: the counts of running jobs and the
-- tokens stay true across workers.  A plain queue never comes here.
CREATE OR REPLACE FUNCTION pgoutbox.claim_ids(queue text, lim integer, max_attempts integer,
                                              sql_mode boolean DEFAULT false)
RETURNS bigint[]
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
-- The planner cannot know a group's LIMIT and prices the statement high
-- enough for JIT, which then costs more than the statement (~30 ms).
SET jit = off
AS $$
DECLARE
    c      pgoutbox.queue_controls;
    n      integer := lim;
    nowc   timestamptz;
    cap    numeric;
    have   numeric;
    ids    bigint[];
BEGIN
    SELECT * INTO c FROM pgoutbox.queue_controls x WHERE x.queue = claim_ids.queue FOR UPDATE;
    IF NOT FOUND THEN
        -- Its controls went away meanwhile: the plain claim's order.
        EXECUTE format('SELECT array(SELECT id FROM pgoutbox.%I q '
                       'WHERE run_at <= now() AND (locked_until IS NULL OR locked_until < now()) '
                       'AND attempts < $2 AND %s ORDER BY priority DESC, id LIMIT $1 '
                       'FOR UPDATE SKIP LOCKED)', queue, pgoutbox.deps_cond(queue, 'q'))
           INTO ids USING lim, max_attempts;
        RETURN ids;
    END IF;
    IF c.paused OR n <= 0 THEN
        RETURN '{}';
    END IF;
    -- Due and expired as of now, not as of the transaction's start: the
    -- lock above may have waited for other claims (or, in sql mode, for
    -- whole batches), and a job enqueued meanwhile is due.
    nowc := clock_timestamp();
    IF c.max_running IS NOT NULL THEN
        -- Leased jobs still in their lease.  In sql mode the batches of
        -- the queue run one at a time (this row's lock is held until the
        -- batch commits), so a batch is the jobs running.
        IF NOT sql_mode THEN
            EXECUTE format('SELECT $1 - count(*) FROM pgoutbox.%I WHERE locked_until >= $2', queue)
               INTO n USING c.max_running, nowc;
        ELSE
            n := c.max_running;
        END IF;
        n := least(lim, n);
    END IF;
    IF c.rate_per_s IS NOT NULL THEN
        cap := coalesce(c.burst, greatest(1, ceil(c.rate_per_s)));
        have := least(cap, c.tokens + extract(epoch FROM nowc - c.refilled_at) * c.rate_per_s);
        n := least(n, floor(have)::integer);
    END IF;
    IF n <= 0 THEN
        IF c.rate_per_s IS NOT NULL THEN
            UPDATE pgoutbox.queue_controls x SET tokens = have, refilled_at = nowc
             WHERE x.queue = claim_ids.queue;
        END IF;
        RETURN '{}';
    END IF;
    -- The groups (a skip scan of <queue>_group), each with its room and
    -- its first ready jobs; then round-robin: every group's first job,
    -- then every group's second, ...
    EXECUTE format($q$
        WITH RECURSIVE g AS (
            (SELECT group_key FROM pgoutbox.%1$I WHERE group_key IS NOT NULL
              ORDER BY group_key LIMIT 1)
            UNION ALL
            SELECT (SELECT group_key FROM pgoutbox.%1$I q
                     WHERE q.group_key > g.group_key ORDER BY group_key LIMIT 1)
              FROM g WHERE g.group_key IS NOT NULL
        ),
        busy AS (
            SELECT group_key, count(*) AS running FROM pgoutbox.%1$I
             WHERE locked_until >= $5 AND group_key IS NOT NULL AND $4
             GROUP BY group_key
        ),
        room AS (
            SELECT g.group_key,
                   CASE WHEN $3::integer IS NULL THEN $1
                        ELSE least($1, $3 - coalesce(b.running, 0)) END AS room
              FROM g LEFT JOIN busy b USING (group_key)
             WHERE g.group_key IS NOT NULL
        ),
        cand AS (
            SELECT j.id, j.priority, row_number() OVER (PARTITION BY r.group_key
                                                        ORDER BY j.priority DESC, j.id) AS turn
              FROM room r, LATERAL (
                   SELECT id, priority FROM pgoutbox.%1$I q
                    WHERE q.group_key = r.group_key AND q.run_at <= $5
                      AND (q.locked_until IS NULL OR q.locked_until < $5)
                      AND q.attempts < $2 AND %2$s
                    ORDER BY q.priority DESC, q.id LIMIT greatest(r.room, 0)) j
            UNION ALL
            SELECT id, priority, row_number() OVER (ORDER BY priority DESC, id)
              FROM (SELECT id, priority, group_key FROM pgoutbox.%1$I q
                     WHERE q.run_at <= $5
                       AND (q.locked_until IS NULL OR q.locked_until < $5)
                       AND q.attempts < $2 AND %2$s
                     ORDER BY q.priority DESC, q.id LIMIT 4 * $1) u
             WHERE u.group_key IS NULL
        ),
        pick AS (SELECT id FROM cand ORDER BY turn, priority DESC, id LIMIT $1)
        SELECT array(SELECT id FROM pgoutbox.%1$I WHERE id = ANY (ARRAY(SELECT id FROM pick))
                      ORDER BY priority DESC, id FOR UPDATE SKIP LOCKED)$q$, queue,
                   pgoutbox.deps_cond(queue, 'q'))
       INTO ids USING n, max_attempts, c.group_concurrency, NOT sql_mode, nowc;
    IF c.rate_per_s IS NOT NULL THEN
        UPDATE pgoutbox.queue_controls x
           SET tokens = have - coalesce(cardinality(ids), 0), refilled_at = nowc
         WHERE x.queue = claim_ids.queue;
    END IF;
    RETURN ids;
END $$;

COMMENT ON FUNCTION pgoutbox.claim_ids(text, integer, integer, boolean) IS
    'The jobs a claim of a queue with controls may take now (pause, limits, rate, fair groups), locked.';
