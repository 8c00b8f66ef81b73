-- 022_queue_more: more of issue 39.
--
-- pause() and resume() steer an outbox captured in its table too: every
-- relay claim is gated by the queue's row of pgoutbox.queue_controls
-- (src/lib/relay/claim.c).  replay(queue, from_ts, to_ts, topic, key,
-- from_id, to_id) queues archived events again.  Those are function
-- bodies and a new function (pause, resume, queue_controls_check,
-- set_queue, replay): definitions.sql makes them.
--
-- Job dependencies: a depends_on column in every work queue (the ids of
-- jobs that must be done before the job is claimed; deps_cond() is the
-- claims' condition), and enqueue(..., depends_on => bigint[]).
--
-- Fair claims without a limit: queue_controls.fair, set by set_queue(...,
-- fair => true) (a new last parameter: a new signature), for an outbox
-- (its concurrent relays take keys round-robin) or a work queue.
DO $$
DECLARE
    q text;
BEGIN
    FOR q IN SELECT name FROM pgoutbox.queues WHERE kind = 'work' ORDER BY name LOOP
        EXECUTE format('ALTER TABLE pgoutbox.%I ADD COLUMN depends_on bigint[]', q);
    END LOOP;
END $$;

-- enqueue() gains a last parameter, depends_on: a new signature.  The
-- roles granted EXECUTE on the old one keep it on the new one (a
-- stand-in here, replaced by functions/enqueue.sql when the definitions
-- run after this step).
CREATE FUNCTION pgoutbox.enqueue(queue text, payload jsonb,
                                 run_at timestamptz DEFAULT now(),
                                 priority integer DEFAULT 0,
                                 unique_key text DEFAULT NULL,
                                 topic text DEFAULT 'job',
                                 key text DEFAULT NULL,
                                 group_key text DEFAULT NULL,
                                 depends_on bigint[] DEFAULT NULL)
RETURNS bigint LANGUAGE sql AS 'SELECT NULL::bigint';

DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT a.grantee::regrole::text AS who
               FROM pg_catalog.pg_proc p, aclexplode(p.proacl) a
              WHERE p.oid = 'pgoutbox.enqueue(text, jsonb, timestamptz, integer, text, text, text, text)'::regprocedure
                AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0
                AND a.grantee <> p.proowner LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgoutbox.enqueue(text, jsonb, timestamptz, '
                       'integer, text, text, text, text, bigint[]) TO %s', r.who);
    END LOOP;
END $$;

DROP FUNCTION pgoutbox.enqueue(text, jsonb, timestamptz, integer, text, text, text, text);

ALTER TABLE pgoutbox.queue_controls ADD COLUMN fair boolean NOT NULL DEFAULT false;

-- set_queue() gains a last parameter, fair: a new signature, with the
-- grants of the old one (a stand-in, replaced by functions/set_queue.sql).
-- The old one is made by the definitions, not by a step: a database
-- built by the steps alone has none.
CREATE FUNCTION pgoutbox.set_queue(name text,
                                   group_concurrency integer DEFAULT NULL,
                                   max_running integer DEFAULT NULL,
                                   rate_per_s numeric DEFAULT NULL,
                                   burst integer DEFAULT NULL,
                                   fair boolean DEFAULT NULL)
RETURNS void LANGUAGE sql AS 'SELECT';

DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT a.grantee::regrole::text AS who
               FROM pg_catalog.pg_proc p, aclexplode(p.proacl) a
              WHERE p.oid = to_regprocedure('pgoutbox.set_queue(text, integer, integer, numeric, integer)')
                AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0
                AND a.grantee <> p.proowner LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgoutbox.set_queue(text, integer, integer, '
                       'numeric, integer, boolean) TO %s', r.who);
    END LOOP;
END $$;

DROP FUNCTION IF EXISTS pgoutbox.set_queue(text, integer, integer, numeric, integer);
