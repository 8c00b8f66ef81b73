-- The statement trigger of every outbox table: NOTIFY only while a relay
-- holds or awaits the queue's sleeper lock (pgoutbox.wake_ns; the relay's
-- side is src/lib/relay/wake.c, the handshake is told in
-- sql/upgrade/015_send_fast.sql).  It runs as the owner of send() inside
-- it, with the caller's search path: everything is qualified.
CREATE OR REPLACE FUNCTION pgoutbox.wake_relay() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Runs with the caller's search path (as send()'s owner inside
    -- send()): everything qualified.
    IF NOT pg_catalog.pg_try_advisory_xact_lock_shared(
               pg_catalog.hashtext('pgoutbox.wake.' OPERATOR(pg_catalog.||) TG_TABLE_NAME), 0) THEN
        PERFORM pg_catalog.pg_notify('pgoutbox_' OPERATOR(pg_catalog.||) TG_TABLE_NAME, '');
    END IF;
    RETURN NULL;
END $$;

COMMENT ON FUNCTION pgoutbox.wake_relay() IS
    'Statement trigger of the outbox: NOTIFY only while a relay holds or awaits its sleeper lock (see the migration send_fast).';
