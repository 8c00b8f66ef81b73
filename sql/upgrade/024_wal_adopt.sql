-- 024_wal_adopt: adopted tables captured through the WAL (issue 37,
-- docs/adopt.md "Capture through the WAL").
--
-- adopt() gains a last parameter, p_capture ('table' or 'wal'): a new
-- signature, made by definitions.sql; the old one goes here (two would
-- make every call ambiguous).  unadopt() drops what a WAL adoption adds
-- (the table's place in the publication, the slot): a new body.
--
-- The publication pgoutbox_wal publishes inserts only: the tables adopted
-- with capture wal join it, and a row's insert is its event (an insert
-- into a partition as one into the partitioned table adopted).  The relays
-- of WAL queues read messages, which no publish option filters.
DROP FUNCTION pgoutbox.adopt(text, text, text, text, text, text, text, text, text, text, text, text, integer);
ALTER PUBLICATION pgoutbox_wal SET (publish = 'insert', publish_via_partition_root = true);
--
-- dead_retry() sends a dead letter of a table adopted with capture wal
-- again as a logical message, as for a WAL queue: a new body.
-- adopted_pending() (for status) returns nothing for such a table: its
-- rows are not its events.
