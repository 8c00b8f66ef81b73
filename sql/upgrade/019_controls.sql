-- 019_controls: work queues users can steer (issue 39).
--
-- pgoutbox.queue_controls holds, per work queue that has any, whether it
-- is paused (pause(), resume()) and its limits (set_queue():
-- group_concurrency, max_running, rate_per_s with burst, whose token
-- bucket is kept in the row).  A queue without a row is claimed by the
-- plain statements as before; the claims of one with a row go through
-- pgoutbox.claim_ids() (functions/claim_ids.sql says how).
--
-- A job may name a group: a group_key column in every work queue (and an
-- index of the groups' ready order for fair claims), enqueue(...,
-- group_key => text), and a group_key in dead_letters so that a retried
-- job keeps its group.  dead_retry() and dead_discard() act on dead
-- letters by ids or filter, in one statement.

CREATE TABLE pgoutbox.queue_controls (
    queue             text        PRIMARY KEY,
    paused            boolean     NOT NULL DEFAULT false,
    group_concurrency integer     CHECK (group_concurrency > 0),
    max_running       integer     CHECK (max_running > 0),
    rate_per_s        numeric     CHECK (rate_per_s > 0),
    burst             integer     CHECK (burst > 0),
    tokens            numeric     NOT NULL DEFAULT 0,  -- the rate's bucket
    refilled_at       timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE pgoutbox.dead_letters ADD COLUMN group_key text;

DO $$
DECLARE
    q text;
BEGIN
    FOR q IN SELECT name FROM pgoutbox.queues WHERE kind = 'work' ORDER BY name LOOP
        EXECUTE format('ALTER TABLE pgoutbox.%I ADD COLUMN group_key text', q);
        EXECUTE format('CREATE INDEX %I ON pgoutbox.%I (group_key, priority DESC, id) '
                       'WHERE group_key IS NOT NULL', q || '_group', q);
    END LOOP;
END $$;

-- enqueue() gains a last parameter, group_key: a new signature.  The
-- roles granted EXECUTE on the old one keep it on the new one (a
-- stand-in here, replaced by functions/enqueue.sql when the definitions
-- run after this step).
CREATE FUNCTION pgoutbox.enqueue(queue text, payload jsonb,
                                 run_at timestamptz DEFAULT now(),
                                 priority integer DEFAULT 0,
                                 unique_key text DEFAULT NULL,
                                 topic text DEFAULT 'job',
                                 key text DEFAULT NULL,
                                 group_key text DEFAULT NULL)
RETURNS bigint LANGUAGE sql AS 'SELECT NULL::bigint';

DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT a.grantee::regrole::text AS who
               FROM pg_catalog.pg_proc p, aclexplode(p.proacl) a
              WHERE p.oid = 'pgoutbox.enqueue(text, jsonb, timestamptz, integer, text, text, text)'::regprocedure
                AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0
                AND a.grantee <> p.proowner LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgoutbox.enqueue(text, jsonb, timestamptz, '
                       'integer, text, text, text, text) TO %s', r.who);
    END LOOP;
END $$;

DROP FUNCTION pgoutbox.enqueue(text, jsonb, timestamptz, integer, text, text, text);
