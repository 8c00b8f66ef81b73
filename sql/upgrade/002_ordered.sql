-- 002_ordered: per-key order through shard leases.
--
-- Each event's key maps to one of the queue's shards (fixed when the queue
-- is created; 64 for the outbox) through a stable 64-bit hash computed in
-- SQL and stored on the row.  Events without a key are unordered and spread
-- by id.  A relay connection ("member") holds leases on a fair share of the
-- shards as session-level advisory locks in the two-integer key space, so a
-- dead connection frees its shards at once; each lease also has an epoch
-- that the claim checks (fencing).

CREATE TABLE pgoutbox.queues (
    name       text    PRIMARY KEY,
    shards     integer NOT NULL CHECK (shards BETWEEN 1 AND 4096),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO pgoutbox.queues (name, shards) VALUES ('outbox', 64);

-- The shard of a key: stable across platforms (hashtextextended is the
-- hash PostgreSQL's hash partitioning relies on).
CREATE FUNCTION pgoutbox.shard_of(key text, id bigint, shards integer)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN key IS NULL THEN (id % shards)::integer
                ELSE (((hashtextextended(key, 0) % shards) + shards) % shards)::integer
           END
$$;

-- A table rewrite: pending events keep their ids and get their shard.
ALTER TABLE pgoutbox.outbox
    ADD COLUMN shard integer GENERATED ALWAYS AS (pgoutbox.shard_of(key, id, 64)) STORED;

-- Retried (and halted) events are few; this index lets an ordered claim
-- find the ones that block a key, and stays tiny.
CREATE INDEX outbox_retrying ON pgoutbox.outbox (key, id) WHERE attempts > 0;

-- Relay members: one row per relay connection in ordered or strict mode.
CREATE TABLE pgoutbox.relays (
    queue        text        NOT NULL,
    member       text        NOT NULL,
    backend_pid  integer     NOT NULL,
    mode         text        NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, member)
);

-- One row per shard (and shard -1: the strict mode leader); the epoch goes
-- up at every take-over.
CREATE TABLE pgoutbox.shard_leases (
    queue       text    NOT NULL,
    shard       integer NOT NULL,
    epoch       bigint  NOT NULL DEFAULT 0,
    owner       text,
    acquired_at timestamptz,
    PRIMARY KEY (queue, shard)
);
INSERT INTO pgoutbox.shard_leases (queue, shard)
SELECT 'outbox', s FROM generate_series(-1, 63) s;

-- The advisory-lock namespace of a queue's shards (first of the two keys).
CREATE FUNCTION pgoutbox.lease_ns(queue text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtext('pgoutbox.shards.' || queue)
$$;

-- Heartbeat and rebalance for one member, on the member's own session:
-- announces the member, counts the live ones (a member is live while its
-- backend exists and its heartbeat is fresh), releases shards beyond its
-- fair share, takes free ones up to it, bumps the epoch of each shard it
-- takes, and returns the shards it owns with their epochs.  Strict mode:
-- one leader owns the pseudo-shard -1 and with it the whole queue.
-- Call it only between transactions of the member: it may release shards.
CREATE FUNCTION pgoutbox.rebalance(p_queue text, p_member text, p_mode text,
                                   p_stale interval DEFAULT '10 seconds')
RETURNS TABLE (shard integer, epoch bigint)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog  -- a relay role needs only EXECUTE
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
BEGIN
    -- One member at a time per queue: concurrent rounds would race for
    -- the same free shards and deadlock on the member rows.
    PERFORM pg_advisory_xact_lock(hashtext('pgoutbox.rebalance.' || p_queue), 0);
    SELECT q.shards INTO nshards FROM pgoutbox.queues q WHERE q.name = p_queue;
    IF nshards IS NULL THEN
        RAISE EXCEPTION 'pgoutbox: queue "%" has no shards (not created for ordered mode)', p_queue
            USING ERRCODE = 'undefined_object';
    END IF;
    -- A heartbeat needs no durability: commit it without waiting for
    -- the WAL flush, and write the row only when it is getting old.
    SET LOCAL synchronous_commit = off;
    INSERT INTO pgoutbox.relays AS r (queue, member, backend_pid, mode)
    VALUES (p_queue, p_member, pg_backend_pid(), p_mode)
    ON CONFLICT (queue, member) DO UPDATE
        SET backend_pid = EXCLUDED.backend_pid, mode = EXCLUDED.mode, heartbeat_at = now()
        WHERE r.backend_pid <> EXCLUDED.backend_pid OR r.mode <> EXCLUDED.mode
           OR r.heartbeat_at < now() - p_stale / 4;
    -- Forget members whose session is gone or silent.
    DELETE FROM pgoutbox.relays r
     WHERE r.queue = p_queue
       AND (r.heartbeat_at < now() - p_stale
            OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = r.backend_pid));

    SELECT coalesce(array_agg(DISTINCT l.objid::bigint::bit(32)::integer), '{}') INTO mine
      FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
       AND l.classid = ns::oid AND l.pid = pg_backend_pid();

    IF p_mode = 'strict' THEN
        -- Leave any shard leases; hold or try the leader lease.
        FOREACH s IN ARRAY mine LOOP
            IF s <> -1 THEN PERFORM pg_advisory_unlock(ns, s); END IF;
        END LOOP;
        IF NOT (-1 = ANY(mine)) AND pg_try_advisory_lock(ns, -1) THEN
            UPDATE pgoutbox.shard_leases l SET epoch = l.epoch + 1, owner = p_member, acquired_at = now()
             WHERE l.queue = p_queue AND l.shard = -1;
            mine := ARRAY[-1];
        ELSIF -1 = ANY(mine) THEN
            mine := ARRAY[-1];
        ELSE
            mine := '{}';
        END IF;
    ELSE
        IF -1 = ANY(mine) THEN
            PERFORM pg_advisory_unlock(ns, -1);
            mine := array_remove(mine, -1);
        END IF;
        SELECT array_agg(r.member ORDER BY r.member) INTO members
          FROM pgoutbox.relays r
         WHERE r.queue = p_queue AND r.mode = 'ordered';
        n := coalesce(array_length(members, 1), 1);
        idx := coalesce(array_position(members, p_member), 1) - 1;
        share := nshards / n + CASE WHEN idx < nshards % n THEN 1 ELSE 0 END;
        -- Release the surplus, highest shards first.
        WHILE coalesce(array_length(mine, 1), 0) > share LOOP
            SELECT max(x) INTO s FROM unnest(mine) x;
            PERFORM pg_advisory_unlock(ns, s);
            mine := array_remove(mine, s);
        END LOOP;
        -- Take free shards up to the share.
        IF coalesce(array_length(mine, 1), 0) < share THEN
            -- Advisory locks are per database: count only this one's.
            SELECT coalesce(array_agg(DISTINCT l.objid::bigint::bit(32)::integer), '{}') INTO held
              FROM pg_locks l
             WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
               AND l.classid = ns::oid
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database());
            FOR s IN SELECT g FROM generate_series(0, nshards - 1) g
                      WHERE g <> ALL (held) ORDER BY g LOOP
                EXIT WHEN coalesce(array_length(mine, 1), 0) >= share;
                IF pg_try_advisory_lock(ns, s) THEN
                    UPDATE pgoutbox.shard_leases l
                       SET epoch = l.epoch + 1, owner = p_member, acquired_at = now()
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

-- Leaves cleanly: releases every lease of this session and the member row.
CREATE FUNCTION pgoutbox.leave(p_queue text, p_member text) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog
AS $$
DECLARE
    ns integer := pgoutbox.lease_ns(p_queue);
    s  integer;
BEGIN
    FOR s IN SELECT DISTINCT l.objid::bigint::bit(32)::integer FROM pg_locks l
              WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
                AND l.classid = ns::oid AND l.pid = pg_backend_pid() LOOP
        PERFORM pg_advisory_unlock(ns, s);
    END LOOP;
    DELETE FROM pgoutbox.relays r WHERE r.queue = p_queue AND r.member = p_member;
END $$;

-- Only relays may take leases (GRANT EXECUTE ... TO relay).
REVOKE ALL ON FUNCTION pgoutbox.rebalance(text, text, text, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.leave(text, text) FROM PUBLIC;
