-- data.sql: the rows a fresh install starts with.  Runs before
-- triggers.sql: the outbox table has its shape already, the queues
-- trigger has nothing to do for it.

-- The outbox is the queue 'outbox', 64 shards, each with its lease row
-- (and shard -1: the strict mode leader).
INSERT INTO pgoutbox.queues (name, shards) VALUES ('outbox', 64);
INSERT INTO pgoutbox.shard_leases (queue, shard)
SELECT 'outbox', s FROM generate_series(-1, 63) s;

-- Today's and the next days' partitions of the inbox and the cron history.
SELECT pgoutbox.inbox_maintain();
SELECT pgoutbox.cron_history_maintain();
