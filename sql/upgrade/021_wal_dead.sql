-- 021_wal_dead: dead letters for queues captured through the WAL
-- (issue 37, docs/wal.md).
--
-- The relay of a WAL queue now writes an event the sink rejects for good,
-- or that used relay.max_attempts, into pgoutbox.dead_letters (as table
-- capture does) and moves on.  dead_retry() sends such a dead letter
-- again as a logical message (a WAL queue has no row to put back): its
-- body alone changed, which the definitions of this version redo.
-- Nothing else changes: this step only records the version.
SELECT 1;
