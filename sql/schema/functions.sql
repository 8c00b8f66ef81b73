-- functions.sql: every function of schema pgoutbox, one file per name (its
-- overloads together), in an order where each file finds what its SQL
-- functions name.  Run by a fresh install and again at the end of every
-- upgrade (CREATE OR REPLACE), so that they are always these.
\ir functions/add_caps.sql
\ir functions/adopt.sql
\ir functions/adopt_expr.sql
\ir functions/adopt_type.sql
\ir functions/adopted_jsonb.sql
\ir functions/adopted_map.sql
\ir functions/adopted_pending.sql
\ir functions/archive_deleted.sql
\ir functions/archive_partitions.sql
\ir functions/caps_on_new_queue.sql
\ir functions/claim_floor.sql
\ir functions/create_queue.sql
\ir functions/cron_fire.sql
\ir functions/cron_history_maintain.sql
\ir functions/cron_history_partition.sql
\ir functions/enqueue.sql
\ir functions/health.sql
\ir functions/inbox_claim.sql
\ir functions/inbox_maintain.sql
\ir functions/lease_ns.sql
\ir functions/leave.sql
\ir functions/maintain.sql
\ir functions/notify_adopted.sql
\ir functions/notify_outbox.sql
\ir functions/outbox_check.sql
\ir functions/queue_kind.sql
\ir functions/rebalance.sql
\ir functions/relay_beat.sql
\ir functions/send.sql
\ir functions/send_batch.sql
\ir functions/send_batch_args.sql
\ir functions/send_batch_error.sql
\ir functions/send_batch_rows.sql
\ir functions/send_batch_to.sql
\ir functions/send_to.sql
\ir functions/set_retention.sql
\ir functions/shard_expr.sql
\ir functions/shard_of.sql
\ir functions/tz_offsets.sql
\ir functions/unadopt.sql
\ir functions/unarchive.sql
\ir functions/wake_ns.sql
\ir functions/wake_relay.sql
\ir functions/work_sql.sql
