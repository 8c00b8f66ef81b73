-- 019_wal: a second capture mode, per queue: through the WAL (issue 37,
-- docs/wal.md).
--
-- pgoutbox.queues.capture says how an outbox's events are captured:
-- 'table' (a row each, as before) or 'wal' (a transactional logical
-- message each, pg_logical_emit_message(true, 'pgoutbox:<queue>', the
-- envelope), streamed by the relay from the slot pgoutbox_<queue>, publication
-- pgoutbox_wal).
-- New functions (in the next version's definitions): create_queue(name,
-- shards, kind, capture), outbox_capture() (outbox_check() returning the
-- capture, read in the same lookup), wal_envelope(), drop_queue() (an
-- outbox queue with its slot), queue_capture() (for the C producer);
-- send_to() and
-- send_batch_to() write a message for a WAL queue.
ALTER TABLE pgoutbox.queues ADD COLUMN capture text NOT NULL DEFAULT 'table'
    CHECK (capture IN ('table', 'wal'));

-- The publication every WAL queue's relay names (tables.sql says why one,
-- made before any slot).
SET LOCAL client_min_messages = error;
CREATE PUBLICATION pgoutbox_wal;
RESET client_min_messages;
