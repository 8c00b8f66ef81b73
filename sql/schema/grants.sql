-- grants.sql: who may call what.  Least privilege: nobody but the owner
-- of schema pgoutbox may call these until granted, per role
-- (GRANT EXECUTE ON FUNCTION pgoutbox.send(text, text, text, jsonb, jsonb)
-- TO producer; the roles of README.md).  The functions not listed keep
-- PostgreSQL's default EXECUTE for PUBLIC: they are pure, or trigger
-- functions, or check their caller themselves.  Run by a fresh install
-- and at the end of every upgrade (REVOKE is idempotent; the grants to
-- roles are kept).

-- Producers: send, send_to, send_batch, send_batch_to and their helpers.
REVOKE ALL ON FUNCTION pgoutbox.send(text, text, text, jsonb, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_to(text, text, text, text, jsonb, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_to_refused(text, text, jsonb, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_batch(text[], text[], text[], jsonb[], jsonb[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_batch(text, text[], text[], jsonb[], jsonb[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_batch_to(text, text[], text[], text[], jsonb[], jsonb[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_batch_to(text, text, text[], text[], jsonb[], jsonb[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_batch_args(text, text[], text[], text[], jsonb[], jsonb[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_batch_rows(jsonb[], text[], text[], jsonb[], text[], text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.send_batch_error(text, bigint, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.outbox_check(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.outbox_capture(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.wal_envelope(bigint, pgoutbox.event_topic, pgoutbox.event_key, pgoutbox.event_type, pgoutbox.event_payload, pgoutbox.event_headers) FROM PUBLIC;

-- Relays: leases, heartbeats, the claim floor, archiving, maintenance.
REVOKE ALL ON FUNCTION pgoutbox.rebalance(text, text, text, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.leave(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.relay_beat(text, text, text, interval, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.claim_floor(text, bigint, bigint, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.unarchive(text, bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.maintain() FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.health(interval, bigint) FROM PUBLIC;

-- Consumers: the inbox.
REVOKE ALL ON FUNCTION pgoutbox.inbox_claim(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.inbox_maintain(interval) FROM PUBLIC;

-- Work queues, workers and cron.
REVOKE ALL ON FUNCTION pgoutbox.create_queue(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.create_queue(text, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.enqueue(text, jsonb, timestamptz, integer, text, text, text, text, bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.create_queue(text, integer, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.drop_queue(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.work_sql(text, text, integer, integer, bigint, bigint) FROM PUBLIC;
-- A queue with controls: its claims (pgoutbox.claim() runs with the
-- worker's rights and is left to PUBLIC).  Every claim looks up the
-- queue's row of pgoutbox.queue_controls (a plain queue has none), so
-- any role may read them: whether a queue is paused or limited is no
-- secret, and a worker role upgraded from before step 019 needs no new
-- grant for its plain claims.
GRANT SELECT ON pgoutbox.queue_controls TO PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.claim_ids(text, integer, integer, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.cron_fire(text, bigint, bigint[], boolean[], text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.cron_history_partition(date) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.cron_history_maintain(interval) FROM PUBLIC;

-- The owner's tools: retention, adoption, queue shapes.
REVOKE ALL ON FUNCTION pgoutbox.set_retention(text, text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.archive_partitions(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.adopt(text, text, text, text, text, text, text, text, text, text, text, text, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.unadopt(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.add_caps(text) FROM PUBLIC;
-- ... and the controls of work queues.
REVOKE ALL ON FUNCTION pgoutbox.pause(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.resume(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.set_queue(text, integer, integer, numeric, integer, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.replay(text, timestamptz, timestamptz, text, text, bigint, bigint) FROM PUBLIC;
