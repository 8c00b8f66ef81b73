-- 023_wal_send: send_to() into a WAL queue as one expression (issue 37,
-- docs/wal.md).
--
-- A producer of a WAL queue paid about twice the server CPU of a plain
-- INSERT per transaction: send_to() looked its queue up in a table,
-- through a function with a SET clause, checked each argument in its own
-- statement and built the envelope with jsonb_build_object().  send_to()
-- now knows a WAL queue by the name of its ids' sequence, <queue>$wal (a
-- catalog cache probe), and writes the message in one expression; the
-- table queues and the errors go to the new send_to_table(), which the
-- definitions of this version create.  The message no longer carries
-- created_at: the relay gives each event its transaction's commit time.
-- Binaries before this version would relay such events with an empty
-- created_at, so this version breaks them.
--
-- Here: the sequence of every queue captured through the WAL is renamed
-- from <queue>_id_seq to <queue>$wal.  ALTER SEQUENCE waits for the
-- producers' transactions that took an id from it; the ids go on where
-- they were.
DO $$
DECLARE
    q text;
BEGIN
    FOR q IN SELECT x.name FROM pgoutbox.queues x WHERE x.capture = 'wal' ORDER BY x.name LOOP
        EXECUTE format('ALTER SEQUENCE pgoutbox.%I RENAME TO %I', q || '_id_seq', q || '$wal');
    END LOOP;
END $$;
