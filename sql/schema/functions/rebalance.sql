-- Heartbeat and rebalance for one member, on the member's own session
-- (see pgoutbox.shard_leases).  The shards of a stalled relay are taken
-- over.  A lease is a session-level advisory lock, so it ended only with its
-- session: a relay that stopped (SIGSTOP, a frozen VM) or whose
-- connection hung (a stalled proxy, a half-open TCP path the kernel keeps
-- ACKing) kept its shards, and their keys waited, for as long as the stall
-- lasted.  Now a member whose heartbeat is older than p_stale (the relay's
-- relay.lease_timeout) is fenced by the next lease round of any other
-- member: its backend is terminated, which rolls back its open claim (it
-- can never commit after this) and frees its leases; the free shards are
-- then taken as usual, with their epochs bumped.  Only a backend that
-- still holds one of this queue's shard leases is terminated (a reused
-- pid is left alone).  The definer of this function needs the right to
-- terminate the relay role's backends (superuser, membership in the relay
-- role, or pg_signal_backend); without it the round warns and goes on.
CREATE OR REPLACE FUNCTION pgoutbox.rebalance(p_queue text, p_member text, p_mode text,
                                              p_stale interval DEFAULT '10 seconds')
RETURNS TABLE (shard integer, epoch bigint)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- a relay role needs only EXECUTE
AS $$
DECLARE
    ns      integer := pgoutbox.lease_ns(p_queue);
    nshards integer;
    members text[];
    n       integer;
    idx     integer;
    share   integer;
    mine    integer[];
    held    integer[];
    s       integer;
    stale   record;
BEGIN
    -- One member at a time per queue: concurrent rounds would race for
    -- the same free shards and deadlock on the member rows.
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('pgoutbox.rebalance.' || p_queue), 0);
    SELECT q.shards INTO nshards FROM pgoutbox.queues q WHERE q.name = p_queue;
    IF nshards IS NULL THEN
        RAISE EXCEPTION 'pgoutbox: queue "%" has no shards (not created for ordered mode)', p_queue
            USING ERRCODE = 'undefined_object';
    END IF;
    -- A heartbeat needs no durability: commit it without waiting for
    -- the WAL flush, and write the row only when it is getting old.
    SET LOCAL synchronous_commit = off;
    INSERT INTO pgoutbox.relays AS r (queue, member, backend_pid, mode)
    VALUES (p_queue, p_member, pg_catalog.pg_backend_pid(), p_mode)
    ON CONFLICT (queue, member) DO UPDATE
        SET backend_pid = EXCLUDED.backend_pid, mode = EXCLUDED.mode, heartbeat_at = pg_catalog.now()
        WHERE r.backend_pid <> EXCLUDED.backend_pid
           OR r.mode <> EXCLUDED.mode
           OR r.heartbeat_at < pg_catalog.now() - p_stale / 4;

    -- Fence the stalled: a member silent for p_stale whose session still
    -- holds shard leases of this queue.
    FOR stale IN
        SELECT r.member, r.backend_pid FROM pgoutbox.relays r
         WHERE r.queue = p_queue
           AND r.heartbeat_at < pg_catalog.now() - p_stale
           AND r.backend_pid <> pg_catalog.pg_backend_pid()
           AND EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                        WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
                          AND l.classid = ns::oid AND l.pid = r.backend_pid)
    LOOP
        BEGIN
            IF pg_catalog.pg_terminate_backend(stale.backend_pid, 5000) THEN
                RAISE WARNING 'pgoutbox: member % of queue % sent no heartbeat for %: its session (pid %) was terminated and its shards are taken over',
                    stale.member, p_queue, p_stale, stale.backend_pid;
            END IF;
        EXCEPTION WHEN insufficient_privilege OR query_canceled THEN
            RAISE WARNING 'pgoutbox: member % of queue % sent no heartbeat for % but its session (pid %) cannot be terminated: %',
                stale.member, p_queue, p_stale, stale.backend_pid, SQLERRM;
        END;
    END LOOP;

    -- Forget members whose session is gone or silent.
    DELETE FROM pgoutbox.relays r
     WHERE r.queue = p_queue
       AND (r.heartbeat_at < pg_catalog.now() - p_stale
            OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.pid = r.backend_pid));

    SELECT coalesce(pg_catalog.array_agg(DISTINCT l.objid::bigint::bit(32)::integer), '{}') INTO mine
      FROM pg_catalog.pg_locks l
     WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
       AND l.classid = ns::oid AND l.pid = pg_catalog.pg_backend_pid();

    IF p_mode = 'strict' THEN
        -- Leave any shard leases; hold or try the leader lease.
        FOREACH s IN ARRAY mine LOOP
            IF s <> -1 THEN PERFORM pg_catalog.pg_advisory_unlock(ns, s); END IF;
        END LOOP;
        IF NOT (-1 = ANY(mine)) AND pg_catalog.pg_try_advisory_lock(ns, -1) THEN
            UPDATE pgoutbox.shard_leases l SET epoch = l.epoch + 1, owner = p_member, acquired_at = pg_catalog.now()
             WHERE l.queue = p_queue AND l.shard = -1;
            mine := ARRAY[-1];
        ELSIF -1 = ANY(mine) THEN
            mine := ARRAY[-1];
        ELSE
            mine := '{}';
        END IF;
    ELSE
        IF -1 = ANY(mine) THEN
            PERFORM pg_catalog.pg_advisory_unlock(ns, -1);
            mine := pg_catalog.array_remove(mine, -1);
        END IF;
        SELECT pg_catalog.array_agg(r.member ORDER BY r.member) INTO members
          FROM pgoutbox.relays r
         WHERE r.queue = p_queue AND r.mode = 'ordered';
        n := coalesce(pg_catalog.array_length(members, 1), 1);
        idx := coalesce(pg_catalog.array_position(members, p_member), 1) - 1;
        share := nshards / n + CASE WHEN idx < nshards % n THEN 1 ELSE 0 END;
        -- Release the surplus, highest shards first.
        WHILE coalesce(pg_catalog.array_length(mine, 1), 0) > share LOOP
            SELECT max(x) INTO s FROM pg_catalog.unnest(mine) x;
            PERFORM pg_catalog.pg_advisory_unlock(ns, s);
            mine := pg_catalog.array_remove(mine, s);
        END LOOP;
        -- Take free shards up to the share.
        IF coalesce(pg_catalog.array_length(mine, 1), 0) < share THEN
            -- Advisory locks are per database: count only this one's.
            SELECT coalesce(pg_catalog.array_agg(DISTINCT l.objid::bigint::bit(32)::integer), '{}') INTO held
              FROM pg_catalog.pg_locks l
             WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
               AND l.classid = ns::oid
               AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                                  WHERE d.datname = pg_catalog.current_database());
            FOR s IN SELECT g FROM pg_catalog.generate_series(0, nshards - 1) g
                      WHERE g <> ALL (held) ORDER BY g LOOP
                EXIT WHEN coalesce(pg_catalog.array_length(mine, 1), 0) >= share;
                IF pg_catalog.pg_try_advisory_lock(ns, s) THEN
                    UPDATE pgoutbox.shard_leases l
                       SET epoch = l.epoch + 1, owner = p_member, acquired_at = pg_catalog.now()
                     WHERE l.queue = p_queue AND l.shard = s;
                    mine := mine || s;
                END IF;
            END LOOP;
        END IF;
    END IF;
    RETURN QUERY
        SELECT l.shard, l.epoch FROM pgoutbox.shard_leases l
         WHERE l.queue = p_queue AND l.shard = ANY (mine)
         ORDER BY l.shard;
END $$;
