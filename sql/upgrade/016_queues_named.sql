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

-- Raises the error for a queue that a producer may not send to: none of
-- that name, a work queue, an adopted table.  fn names the caller.
CREATE FUNCTION pgoutbox.outbox_check(fn text, queue text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    SELECT x.kind INTO k FROM pgoutbox.queues x WHERE x.name = outbox_check.queue;
    IF k IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.%: no outbox queue named "%" in this database', fn, queue
            USING ERRCODE = 'undefined_object',
                  HINT = format('Create it with SELECT pgoutbox.create_queue(%L, 64, ''outbox'') or `pgoutbox queue create --kind outbox %s`.',
                                queue, queue);
    ELSIF k = 'work' THEN
        RAISE EXCEPTION 'pgoutbox.%: queue "%" is a work queue, not an outbox: enqueue its jobs with pgoutbox.enqueue(''%'', payload)',
            fn, queue, queue USING ERRCODE = 'wrong_object_type';
    ELSIF k <> 'outbox' THEN
        RAISE EXCEPTION 'pgoutbox.%: queue "%" is an adopted table (%), not an outbox of pgoutbox: write its rows into that table',
            fn, queue, k USING ERRCODE = 'wrong_object_type';
    END IF;
END $$;
REVOKE ALL ON FUNCTION pgoutbox.outbox_check(text, text) FROM PUBLIC;

-- The producer API for an outbox queue: send() into queue.  Call it
-- inside your transaction; it returns the event's id.  A queue that does
-- not exist or is not an outbox is an error, and nothing is written.
-- The outbox itself goes through send() (its checks, its plan); another
-- queue's INSERT names its table, so it is planned at each call
-- (EXECUTE).
CREATE FUNCTION pgoutbox.send_to(queue text, topic text, key text, type text, payload jsonb,
                                 headers jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a producer role needs only EXECUTE
AS $$
DECLARE
    new_id bigint;
BEGIN
    PERFORM pgoutbox.outbox_check('send_to', queue);
    IF queue = 'outbox' THEN
        RETURN pgoutbox.send(topic, key, type, payload, headers);
    END IF;
    -- send()'s checks (001), with this function's name.
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
    EXECUTE format('INSERT INTO pgoutbox.%I (topic, key, type, payload, headers) '
                   'VALUES ($1, $2, $3, $4, $5) RETURNING id', queue)
        INTO new_id USING topic, key, coalesce(type, ''), payload, coalesce(headers, '{}');
    RETURN new_id;
END $$;

COMMENT ON FUNCTION pgoutbox.send_to(text, text, text, text, jsonb, jsonb) IS
    'Writes an event into the outbox queue queue inside the caller''s transaction; returns its id.';

-- send_batch() (015) in two pieces that send_batch_to() below shares
-- with it, so that its rules live once: the checks of the arguments, and
-- the rows (each element checked in the statement that inserts it, so
-- that a bad one leaves nothing of the call).  send_batch() keeps its
-- static INSERT into the outbox (a plan kept for the session).

-- The checks; returns the topic of every event when one is given (NULL
-- when each has its own, and for an empty batch).  fn names the caller.
CREATE FUNCTION pgoutbox.send_batch_args(fn text, topics text[], keys text[], types text[],
                                         payloads jsonb[], headers jsonb[])
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer := cardinality(payloads);
    one text;
BEGIN
    IF payloads IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.%: payloads must not be NULL', fn
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_ndims(payloads) > 1 OR array_ndims(topics) > 1 OR array_ndims(keys) > 1
       OR array_ndims(types) > 1 OR array_ndims(headers) > 1 THEN
        RAISE EXCEPTION 'pgoutbox.%: arrays must have one dimension', fn
            USING ERRCODE = 'array_subscript_error';
    END IF;
    IF topics IS NULL OR cardinality(topics) NOT IN (1, n) THEN
        RAISE EXCEPTION 'pgoutbox.%: % topics for % payloads: give one topic or one per payload',
            fn, coalesce(cardinality(topics), 0), n USING ERRCODE = 'array_subscript_error';
    END IF;
    IF cardinality(keys) <> n OR cardinality(types) <> n OR cardinality(headers) <> n THEN
        RAISE EXCEPTION 'pgoutbox.%: % payloads but % keys, % types, % headers: each array must have one element per payload (or be NULL)',
            fn, n, coalesce(cardinality(keys)::text, 'NULL'), coalesce(cardinality(types)::text, 'NULL'),
            coalesce(cardinality(headers)::text, 'NULL') USING ERRCODE = 'array_subscript_error';
    END IF;
    IF n = 0 OR cardinality(topics) <> 1 THEN
        RETURN NULL;
    END IF;
    one := topics[array_lower(topics, 1)];
    IF one IS NULL OR one = '' THEN
        RAISE EXCEPTION 'pgoutbox.%: topics[1] is empty or NULL', fn
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN one;
END $$;

-- The rows of a batch, in input order (i), each element checked: a bad
-- one raises from inside the INSERT that reads them.  unnest() of several
-- arrays walks them side by side (a NULL array gives NULLs).  STABLE and
-- without settings so that PostgreSQL inlines it into that INSERT.
CREATE FUNCTION pgoutbox.send_batch_rows(payloads jsonb[], keys text[], types text[],
                                         headers jsonb[], topics text[], one text)
RETURNS TABLE (topic text, key text, type text, payload jsonb, header jsonb, i bigint)
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN one IS NOT NULL THEN one
                WHEN p.topic IS NULL OR p.topic = ''
                THEN pgoutbox.send_batch_error('topics', p.i, 'is empty or NULL')
                ELSE p.topic END,
           p.key,
           coalesce(p.type, ''),
           CASE WHEN p.payload IS NULL
                THEN pgoutbox.send_batch_error('payloads', p.i, 'is NULL (use ''null''::jsonb)')::jsonb
                WHEN pg_catalog.pg_column_size(p.payload) > 1048576
                THEN pgoutbox.send_batch_error('payloads', p.i,
                         pg_catalog.format('is %s bytes, the limit is 1048576',
                                           pg_catalog.pg_column_size(p.payload)),
                         '54000')::jsonb
                ELSE p.payload END,
           CASE WHEN p.header IS NULL THEN '{}'
                WHEN pg_catalog.jsonb_typeof(p.header) <> 'object'
                THEN pgoutbox.send_batch_error('headers', p.i,
                         pg_catalog.format('must be a JSON object, not %s',
                                           pg_catalog.jsonb_typeof(p.header)))::jsonb
                ELSE p.header END,
           p.i
      FROM unnest(payloads, keys, types, headers,
                  CASE WHEN one IS NULL THEN topics END)
           WITH ORDINALITY AS p(payload, key, type, header, topic, i)
$$;

REVOKE ALL ON FUNCTION pgoutbox.send_batch_args(text, text[], text[], text[], jsonb[], jsonb[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_batch_rows(jsonb[], text[], text[], jsonb[], text[], text) FROM PUBLIC;

-- 015's send_batch() on the two pieces; the same arguments, rules and
-- errors.
CREATE OR REPLACE FUNCTION pgoutbox.send_batch(topics text[], keys text[], types text[],
                                               payloads jsonb[], headers jsonb[] DEFAULT NULL)
RETURNS bigint[]
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a producer role needs only EXECUTE
AS $$
DECLARE
    one text := pgoutbox.send_batch_args('send_batch', topics, keys, types, payloads, headers);
    ids bigint[];
BEGIN
    IF cardinality(payloads) = 0 THEN
        RETURN '{}';
    END IF;
    WITH ins AS (
        INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
        SELECT r.topic, r.key, r.type, r.payload, r.header
          FROM pgoutbox.send_batch_rows(payloads, keys, types, headers, topics, one) r
         ORDER BY r.i
        RETURNING id
    )
    SELECT array_agg(id ORDER BY id) INTO ids FROM ins;
    RETURN ids;
END $$;

-- send_batch() into queue: the same arguments after the queue, the same
-- checks and errors, the ids in input order; nothing of the call is
-- written when anything is wrong.  The outbox goes through send_batch().
CREATE FUNCTION pgoutbox.send_batch_to(queue text, topics text[], keys text[], types text[],
                                       payloads jsonb[], headers jsonb[] DEFAULT NULL)
RETURNS bigint[]
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a producer role needs only EXECUTE
AS $$
DECLARE
    one text;
    ids bigint[];
BEGIN
    PERFORM pgoutbox.outbox_check('send_batch_to', queue);
    IF queue = 'outbox' THEN
        RETURN pgoutbox.send_batch(topics, keys, types, payloads, headers);
    END IF;
    one := pgoutbox.send_batch_args('send_batch_to', topics, keys, types, payloads, headers);
    IF cardinality(payloads) = 0 THEN
        RETURN '{}';
    END IF;
    EXECUTE format('WITH ins AS (INSERT INTO pgoutbox.%I (topic, key, type, payload, headers) '
                   'SELECT r.topic, r.key, r.type, r.payload, r.header '
                   'FROM pgoutbox.send_batch_rows($1, $2, $3, $4, $5, $6) r ORDER BY r.i '
                   'RETURNING id) SELECT array_agg(id ORDER BY id) FROM ins', queue)
        INTO ids USING payloads, keys, types, headers, topics, one;
    RETURN ids;
END $$;

CREATE FUNCTION pgoutbox.send_batch_to(queue text, topic text, keys text[], types text[],
                                       payloads jsonb[], headers jsonb[] DEFAULT NULL)
RETURNS bigint[]
LANGUAGE sql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pgoutbox.send_batch_to(queue, ARRAY[topic], keys, types, payloads, headers)
$$;

COMMENT ON FUNCTION pgoutbox.send_batch_to(text, text[], text[], text[], jsonb[], jsonb[]) IS
    'send_batch into the outbox queue queue; returns the ids in input order.';
COMMENT ON FUNCTION pgoutbox.send_batch_to(text, text, text[], text[], jsonb[], jsonb[]) IS
    'send_batch_to with one topic for every event.';

-- Least privilege, as for send(): granted per role (and per service).
REVOKE ALL ON FUNCTION pgoutbox.send_to(text, text, text, text, jsonb, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_batch_to(text, text[], text[], text[], jsonb[], jsonb[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_batch_to(text, text, text[], text[], jsonb[], jsonb[]) FROM PUBLIC;
