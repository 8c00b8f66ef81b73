-- pgoutbox.work_sql, the SQL worker's batch, says which job failed, with
-- its error and when it is retried: a NOTICE per failed or dead-lettered
-- job (hint 'pgoutbox.work_sql'; a retry's DETAIL is 'retry_in_ms=N').
-- `pgoutbox worker --sql` logs them and wakes when the first retry is due
-- instead of at its next poll.
--
-- A queue with controls (a row in pgoutbox.queue_controls: paused,
-- limits, groups) takes its jobs from pgoutbox.claim_ids(), whose lock on the
-- queue's controls row is held until the batch commits: such a queue
-- runs one batch at a time across workers.  A plain queue takes the
-- statements below unchanged.
CREATE OR REPLACE FUNCTION pgoutbox.work_sql(queue text, func text, lim integer,
                                  max_attempts integer DEFAULT 10,
                                  base_ms bigint DEFAULT 1000,
                                  max_ms bigint DEFAULT 300000,
                                  OUT claimed integer, OUT done integer,
                                  OUT failed integer, OUT dead integer)
LANGUAGE plpgsql
AS $$
DECLARE
    fn   text;
    job  record;
    err  text;
    wait bigint;
    ids  bigint[];
BEGIN
    claimed := 0; done := 0; failed := 0; dead := 0;
    IF to_regprocedure(func || '(jsonb)') IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.work_sql: no function %(jsonb)', func
            USING ERRCODE = 'undefined_function';
    END IF;
    fn := to_regprocedure(func || '(jsonb)')::regproc::text;
    IF EXISTS (SELECT 1 FROM pgoutbox.queue_controls c WHERE c.queue = work_sql.queue) THEN
        ids := pgoutbox.claim_ids(queue, lim, max_attempts, true);
        IF cardinality(ids) = 0 THEN
            RETURN;
        END IF;
    END IF;
    -- Fast path: the whole batch in one statement (in a subtransaction).
    -- If any job fails, it is rolled back (claims included) and the slow
    -- path below runs each job in its own subtransaction.
    BEGIN
        EXECUTE format(
            'WITH c AS (SELECT id, payload FROM pgoutbox.%1$I j '
            '            WHERE %3$s '
            '            ORDER BY priority DESC, id LIMIT $1 FOR UPDATE SKIP LOCKED), '
            '     r AS MATERIALIZED (SELECT id, %2$s(payload) IS NULL AS x FROM c), '
            '     d AS (DELETE FROM pgoutbox.%1$I q USING r WHERE q.id = r.id RETURNING 1) '
            'SELECT count(*) FROM d', queue, fn,
            CASE WHEN ids IS NULL
                 THEN 'run_at <= now() AND (locked_until IS NULL OR locked_until < now()) '
                      'AND attempts < $2 AND ' || pgoutbox.deps_cond(queue, 'j')
                 ELSE 'id = ANY ($3)' END)
           INTO done USING lim, max_attempts, ids;
        claimed := done;
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        done := 0;
    END;
    FOR job IN EXECUTE format(
        'SELECT id, payload, attempts FROM pgoutbox.%I j '
        ' WHERE %s '
        ' ORDER BY priority DESC, id LIMIT $1 FOR UPDATE SKIP LOCKED', queue,
        CASE WHEN ids IS NULL
             THEN 'run_at <= now() AND (locked_until IS NULL OR locked_until < now()) '
                  'AND attempts < $2 AND ' || pgoutbox.deps_cond(queue, 'j')
             ELSE 'id = ANY ($3)' END)
        USING lim, max_attempts, ids
    LOOP
        claimed := claimed + 1;
        BEGIN
            EXECUTE format('SELECT %s($1)', fn) USING job.payload;
            EXECUTE format('DELETE FROM pgoutbox.%I WHERE id = $1', queue) USING job.id;
            done := done + 1;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS err = MESSAGE_TEXT;
            IF job.attempts + 1 >= max_attempts THEN
                EXECUTE format(
                    'WITH d AS (DELETE FROM pgoutbox.%I WHERE id = $1 RETURNING *) '
                    'INSERT INTO pgoutbox.dead_letters (id, queue, topic, key, type, payload, headers, created_at, attempts, last_error, group_key) '
                    'SELECT id, $2, topic, key, type, payload, headers, created_at, attempts + 1, $3, group_key FROM d '
                    'ON CONFLICT (queue, id) DO UPDATE SET attempts = EXCLUDED.attempts, '
                    'last_error = EXCLUDED.last_error, failed_at = now(), payload = EXCLUDED.payload', queue)
                    USING job.id, queue, err;
                dead := dead + 1;
                RAISE NOTICE USING
                    MESSAGE = format('job %s dead-lettered after %s attempts: %s',
                                     job.id, job.attempts + 1, err),
                    HINT = 'pgoutbox.work_sql';
            ELSE
                wait := least(max_ms, base_ms * (2 ^ job.attempts)::bigint);
                wait := wait / 2 + (random() * (wait / 2))::bigint;
                EXECUTE format('UPDATE pgoutbox.%I SET attempts = attempts + 1, last_error = $2, '
                               'run_at = now() + $3 * interval ''1 millisecond'' WHERE id = $1', queue)
                    USING job.id, err, wait;
                failed := failed + 1;
                -- The worker logs it and comes back when it is due.
                RAISE NOTICE USING
                    MESSAGE = format('job %s failed (attempt %s of %s), retry in %s ms: %s',
                                     job.id, job.attempts + 1, max_attempts, wait, err),
                    DETAIL = format('retry_in_ms=%s', wait),
                    HINT = 'pgoutbox.work_sql';
            END IF;
        END;
    END LOOP;
END $$;
