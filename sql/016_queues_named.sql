-- 016_queues_named: every relay of a queue is known with its mode, and a
-- database holds several outboxes (issue 20, items 6 and 8).
--
-- Modes mixed on one queue.  A concurrent relay claims with SKIP LOCKED
-- and ignores shard leases, so next to ordered (or strict) relays of the
-- same queue it breaks their per-key order; an ordered and a strict relay
-- claim past each other as well.  Only the ordered modes registered in
-- pgoutbox.relays (rebalance(), 002), so nothing could see the mix.  Now
-- every relay announces itself: relay_beat() below, on one connection of
-- each relay, every relay.heartbeat (a concurrent relay) or inside the
-- first connection's lease round (the ordered modes); the row is written
-- only when it is getting old, as rebalance() does, so a beat costs one
-- short statement and no batch pays for it.  A relay that starts on a
-- queue whose live relays run another mode is refused (its first beat
-- raises, and it exits 2 naming them); one that appears later is reported
-- by every beat of the others (an ERROR in their logs, the gauge
-- pgoutbox_relay_mode_conflicts, and `pgoutbox status`).
--
-- Several outboxes.  Two services in one database each want their own
-- outbox and their own relay, so that neither relays the other's events.
-- A queue of kind 'outbox' other than pgoutbox.outbox existed in the
-- model (the relay, the claim floor and status take any) but nothing made
-- one, and pgoutbox.send wrote only pgoutbox.outbox.  Now
-- create_queue(name, shards, 'outbox') makes one, and send_to(queue, ...)
-- writes into it under the producer's least privilege.

-- A relay's heartbeat and its neighbours of another mode.  Registers (or
-- refreshes) the member p_member of queue p_queue running p_mode, forgets
-- members whose session is gone, and returns the live members of the
-- queue (session present, heartbeat within p_stale) that run another
-- mode.  p_join: the relay's first beat; then it is an error (object_in_use,
-- naming them), and the member is not registered, when there are any.
-- Stale members are left to rebalance(), which fences them first.
CREATE FUNCTION pgoutbox.relay_beat(p_queue text, p_member text, p_mode text,
                                    p_stale interval, p_join boolean)
RETURNS TABLE (other_member text, other_mode text, other_pid integer)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a relay role needs only EXECUTE
AS $$
DECLARE
    others text;
    modes  text;
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('concurrent', 'ordered', 'strict') THEN
        RAISE EXCEPTION 'pgoutbox.relay_beat: mode must be concurrent, ordered or strict, not %',
            coalesce(p_mode, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A join takes the lock of rebalance(): a join and the rounds (or
    -- joins) of other members see each other's rows, never both miss
    -- them.  Later beats need no lock: they only refresh their own row.
    IF p_join THEN
        PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('pgoutbox.rebalance.' || p_queue), 0);
    END IF;
    SET LOCAL synchronous_commit = off;
    DELETE FROM pgoutbox.relays r
     WHERE r.queue = p_queue AND r.member <> p_member
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.pid = r.backend_pid);
    IF p_join THEN
        SELECT pg_catalog.string_agg(pg_catalog.format('%s (%s, pid %s)', r.member, r.mode, r.backend_pid),
                                     ', ' ORDER BY r.member),
               pg_catalog.string_agg(DISTINCT r.mode, ' and ')
          INTO others, modes
          FROM pgoutbox.relays r
         WHERE r.queue = p_queue AND r.member <> p_member AND r.mode <> p_mode
           AND r.heartbeat_at >= pg_catalog.now() - p_stale;
        IF others IS NOT NULL THEN
            RAISE EXCEPTION 'queue "%" has relays in % mode: %; this one runs in % mode, and relays of different modes on one queue break its per-key order (docs/ordering.md, "Mixing modes"): run every relay of the queue in one mode (stop those first, or start this one with --mode %)',
                p_queue, modes, others, p_mode,
                CASE WHEN modes LIKE '% and %' THEN 'MODE' ELSE modes END
                USING ERRCODE = 'object_in_use';
        END IF;
    END IF;
    INSERT INTO pgoutbox.relays AS r (queue, member, backend_pid, mode)
    VALUES (p_queue, p_member, pg_catalog.pg_backend_pid(), p_mode)
    ON CONFLICT (queue, member) DO UPDATE
        SET backend_pid = EXCLUDED.backend_pid, mode = EXCLUDED.mode, heartbeat_at = pg_catalog.now()
        WHERE r.backend_pid <> EXCLUDED.backend_pid
           OR r.mode <> EXCLUDED.mode
           OR r.heartbeat_at < pg_catalog.now() - p_stale / 4;
    RETURN QUERY
        SELECT r.member, r.mode, r.backend_pid FROM pgoutbox.relays r
         WHERE r.queue = p_queue AND r.member <> p_member AND r.mode <> p_mode
           AND r.heartbeat_at >= pg_catalog.now() - p_stale
         ORDER BY r.member;
END $$;

COMMENT ON FUNCTION pgoutbox.relay_beat(text, text, text, interval, boolean) IS
    'A relay''s heartbeat in pgoutbox.relays; returns the live relays of the queue in another mode (p_join: refuses to join them).';

-- Relays only, like rebalance(); the roles that may run rebalance() get
-- it, so that their relays keep announcing themselves after this
-- migration.
REVOKE ALL ON FUNCTION pgoutbox.relay_beat(text, text, text, interval, boolean) FROM PUBLIC;
DO $$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT DISTINCT a.grantee::regrole::text
               FROM pg_catalog.pg_proc p, aclexplode(p.proacl) a
              WHERE p.oid = 'pgoutbox.rebalance(text, text, text, interval)'::regprocedure
                AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0
                AND a.grantee <> p.proowner LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgoutbox.relay_beat(text, text, text, interval, boolean) TO %s', r);
    END LOOP;
END $$;

-- Creates a queue of either kind.  'work': create_queue(name, shards).
-- 'outbox': a table with pgoutbox.outbox's columns, indexes and wake-up
-- trigger, relayed by `pgoutbox relay --queue NAME` and written by
-- send_to(NAME, ...).  The name, the shards and the table are checked
-- (and the queue registered, with its shard leases and caps) by the work
-- queue's function, so that one definition holds those rules; the
-- work queue's own columns and indexes are then taken off.
CREATE FUNCTION pgoutbox.create_queue(name text, shards integer, kind text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q    text := create_queue.name;
    wake regproc;
BEGIN
    IF kind IS NULL OR kind NOT IN ('work', 'outbox') THEN
        RAISE EXCEPTION 'pgoutbox.create_queue: kind must be work or outbox, not %', coalesce(kind, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pgoutbox.create_queue(q, shards);
    IF kind = 'work' THEN
        RETURN;
    END IF;
    -- Dropping the columns drops their indexes (_unique_key, _claim).
    EXECUTE format('DROP INDEX pgoutbox.%I', q || '_leased');
    EXECUTE format('ALTER TABLE pgoutbox.%I DROP COLUMN priority, DROP COLUMN unique_key, '
                   'DROP COLUMN epoch, ALTER COLUMN topic DROP DEFAULT', q);
    -- The outbox's partial indexes (002 and 006): what an ordered claim
    -- waits behind, and what a claim takes below its floor.
    EXECUTE format('CREATE INDEX %I ON pgoutbox.%I (key, id) WHERE attempts > 0', q || '_retrying', q);
    EXECUTE format('CREATE INDEX %I ON pgoutbox.%I (id) WHERE attempts > 0 OR last_error IS NOT NULL',
                   q || '_behind', q);
    -- Producers wake its relays the way the outbox's do: the function of
    -- the outbox's own trigger.
    SELECT t.tgfoid::regproc INTO wake FROM pg_catalog.pg_trigger t
     WHERE t.tgrelid = 'pgoutbox.outbox'::regclass AND t.tgname = 'outbox_notify';
    EXECUTE format('DROP TRIGGER %I ON pgoutbox.%I', q || '_notify', q);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON pgoutbox.%I '
                   'FOR EACH STATEMENT EXECUTE FUNCTION %s()', q || '_notify', q,
                   coalesce(wake, 'pgoutbox.notify_outbox'::regproc));
    UPDATE pgoutbox.queues x SET kind = 'outbox' WHERE x.name = q;
END $$;

COMMENT ON FUNCTION pgoutbox.create_queue(text, integer, text) IS
    'Creates a work queue (kind work) or an outbox of its own (kind outbox) named name with shards shards.';
REVOKE ALL ON FUNCTION pgoutbox.create_queue(text, integer, text) FROM PUBLIC;

-- The producer API for an outbox queue: send() into queue.  Call it
-- inside your transaction; it returns the event's id.  A queue that does
-- not exist or is not an outbox is an error, and nothing is written.
CREATE FUNCTION pgoutbox.send_to(queue text, topic text, key text, type text, payload jsonb,
                                 headers jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a producer role needs only EXECUTE
AS $$
DECLARE
    k      text;
    new_id bigint;
BEGIN
    SELECT x.kind INTO k FROM pgoutbox.queues x WHERE x.name = send_to.queue;
    IF k IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.send_to: no outbox queue named "%" in this database', queue
            USING ERRCODE = 'undefined_object',
                  HINT = format('Create it with SELECT pgoutbox.create_queue(%L, 64, ''outbox'') or `pgoutbox queue create --kind outbox %s`.',
                                queue, queue);
    ELSIF k = 'work' THEN
        RAISE EXCEPTION 'pgoutbox.send_to: queue "%" is a work queue, not an outbox: enqueue its jobs with pgoutbox.enqueue(''%'', payload)',
            queue, queue USING ERRCODE = 'wrong_object_type';
    ELSIF k <> 'outbox' THEN
        RAISE EXCEPTION 'pgoutbox.send_to: queue "%" is an adopted table (%), not an outbox of pgoutbox: write its rows into that table',
            queue, k USING ERRCODE = 'wrong_object_type';
    END IF;
    IF topic IS NULL OR topic = '' THEN
        RAISE EXCEPTION 'pgoutbox.send_to: topic must not be empty'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.send_to: payload must not be NULL (use ''null''::jsonb)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_column_size(payload) > 1048576 THEN
        RAISE EXCEPTION 'pgoutbox.send_to: payload is % bytes, the limit is 1048576',
            pg_column_size(payload) USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN
        RAISE EXCEPTION 'pgoutbox.send_to: headers must be a JSON object, not %',
            jsonb_typeof(headers) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF queue = 'outbox' THEN
        -- A plan kept for the session, as send()'s.
        INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
        VALUES (topic, key, coalesce(type, ''), payload, coalesce(headers, '{}'))
        RETURNING id INTO new_id;
    ELSE
        EXECUTE format('INSERT INTO pgoutbox.%I (topic, key, type, payload, headers) '
                       'VALUES ($1, $2, $3, $4, $5) RETURNING id', queue)
            INTO new_id USING topic, key, coalesce(type, ''), payload, coalesce(headers, '{}');
    END IF;
    RETURN new_id;
END $$;

COMMENT ON FUNCTION pgoutbox.send_to(text, text, text, text, jsonb, jsonb) IS
    'Writes an event into the outbox queue queue inside the caller''s transaction; returns its id.';

-- Least privilege, as for send(): granted per role (and per service).
REVOKE ALL ON FUNCTION pgoutbox.send_to(text, text, text, text, jsonb, jsonb) FROM PUBLIC;
