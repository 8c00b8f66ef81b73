-- tables.sql: the tables, domains and indexes of schema pgoutbox, as they
-- are at the newest schema version.  Created once, by a fresh install; an
-- existing database gets a change to them from an upgrade step
-- (sql/upgrade/, see sql/README.md).  The schema pgoutbox and the table
-- pgoutbox.migrations are created by the migration runner
-- (src/lib/db/schema.c) before this file runs.
--
-- A few names keep the shape that the upgrade path gives them, so that a
-- fresh install and an upgraded database are the same schema
-- (tests/integration/t_schema_equiv.sh compares them): cron_history's
-- constraints end in 1 (008 replaced the table and PostgreSQL numbered the
-- new names), and the domains' checks are NOT VALID (017 added them to
-- domains already in use without scanning every queue).

-- The fields of an event, one domain each: a queue table's columns are of
-- these types, so that every queue checks the same limits (sizes as
-- given, before TOAST compresses them).  A violation is a check_violation
-- (SQLSTATE 23514) naming the domain's constraint.
CREATE DOMAIN pgoutbox.event_topic AS text;
CREATE DOMAIN pgoutbox.event_key AS text;
CREATE DOMAIN pgoutbox.event_type AS text;
CREATE DOMAIN pgoutbox.event_payload AS jsonb;
CREATE DOMAIN pgoutbox.event_headers AS jsonb;
ALTER DOMAIN pgoutbox.event_topic ADD CONSTRAINT event_topic_not_empty CHECK (VALUE <> '') NOT VALID;
ALTER DOMAIN pgoutbox.event_topic ADD CONSTRAINT event_topic_max_256 CHECK (octet_length(VALUE) <= 256) NOT VALID;
ALTER DOMAIN pgoutbox.event_key ADD CONSTRAINT event_key_max_1024 CHECK (octet_length(VALUE) <= 1024) NOT VALID;
ALTER DOMAIN pgoutbox.event_type ADD CONSTRAINT event_type_max_256 CHECK (octet_length(VALUE) <= 256) NOT VALID;
ALTER DOMAIN pgoutbox.event_payload ADD CONSTRAINT event_payload_max_1mib CHECK (pg_column_size(VALUE) <= 1048576) NOT VALID;
ALTER DOMAIN pgoutbox.event_headers ADD CONSTRAINT event_headers_object CHECK (jsonb_typeof(VALUE) = 'object') NOT VALID;
ALTER DOMAIN pgoutbox.event_headers ADD CONSTRAINT event_headers_max_64k CHECK (pg_column_size(VALUE) <= 65536) NOT VALID;

-- The outbox: the default queue.  A row is one event waiting to be
-- relayed; it is deleted in the same transaction as the sink's
-- acknowledgement.  Queues made by create_queue() have the same columns.
-- A row's shard is not stored: it is pgoutbox.shard_of(key, id, shards),
-- which the relay's ordered claim computes (src/lib/relay/claim.c).
CREATE TABLE pgoutbox.outbox (
    id           bigserial              PRIMARY KEY,
    topic        pgoutbox.event_topic   NOT NULL,
    key          pgoutbox.event_key,                  -- aggregate id: ordering
    type         pgoutbox.event_type    NOT NULL DEFAULT ''::text,
    payload      pgoutbox.event_payload NOT NULL,
    headers      pgoutbox.event_headers NOT NULL DEFAULT '{}'::jsonb,  -- trace context, content type
    created_at   timestamptz NOT NULL DEFAULT now(),
    run_at       timestamptz NOT NULL DEFAULT now(),  -- not before (delay, backoff)
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text,
    locked_by    text,                                -- lease claim mode
    locked_until timestamptz
) WITH (autovacuum_vacuum_scale_factor = 0.01,      -- rows are inserted once
        autovacuum_vacuum_insert_scale_factor = 0.05); -- and deleted soon

-- Retried (and halted) events are few; this index lets an ordered claim
-- find the ones that block a key, and stays tiny.
CREATE INDEX outbox_retrying ON pgoutbox.outbox (key, id) WHERE attempts > 0;
-- The events that failed at least once, for the claim floor
-- (pgoutbox.claim_floor).
CREATE INDEX outbox_behind ON pgoutbox.outbox (id) WHERE attempts > 0 OR last_error IS NOT NULL;

-- Events that failed max attempts or were rejected by the sink for good.
CREATE TABLE pgoutbox.dead_letters (
    id          bigint      NOT NULL,
    queue       text        NOT NULL,
    topic       text        NOT NULL,
    key         text,
    type        text        NOT NULL,
    payload     jsonb       NOT NULL,
    headers     jsonb       NOT NULL,
    created_at  timestamptz NOT NULL,
    attempts    integer     NOT NULL,
    last_error  text,
    failed_at   timestamptz NOT NULL DEFAULT now(),
    group_key   text,       -- a work queue job's group, kept for a retry
    PRIMARY KEY (queue, id)
);

-- Every queue: the outbox, outboxes of their own and work queues (tables
-- pgoutbox.<name>), adopted tables (pgoutbox.adopted).  Each event's key
-- maps to one of the queue's shards, fixed when the queue is created.
CREATE TABLE pgoutbox.queues (
    name           text        PRIMARY KEY,
    shards         integer     NOT NULL CHECK (shards BETWEEN 1 AND 4096),
    created_at     timestamptz NOT NULL DEFAULT now(),
    kind           text        NOT NULL DEFAULT 'outbox',
    retention      text        NOT NULL DEFAULT 'delete'
        CHECK (retention IN ('delete', 'archive')),
    retention_days integer     NOT NULL DEFAULT 7
        CHECK (retention_days BETWEEN 1 AND 3650),
    CONSTRAINT queues_kind_check CHECK (kind IN ('outbox', 'work', 'adopted')),
    -- How an outbox's events are captured (docs/wal.md): 'table', a row
    -- each, or 'wal', a logical message each, streamed from the slot
    -- pgoutbox_<name> (publication pgoutbox_<name>).
    capture        text        NOT NULL DEFAULT 'table'
        CHECK (capture IN ('table', 'wal'))
);

-- The controls of a work queue (issue 39), one row per queue that has
-- any: paused, or limits set by pgoutbox.set_queue().  A queue without a
-- row is claimed by the plain statements, as before step 019;
-- one with a row by pgoutbox.claim_ids(), which takes the row FOR UPDATE
-- and keeps the rate's token bucket in it.
CREATE TABLE pgoutbox.queue_controls (
    queue             text        PRIMARY KEY,
    paused            boolean     NOT NULL DEFAULT false,
    group_concurrency integer     CHECK (group_concurrency > 0),
    max_running       integer     CHECK (max_running > 0),
    rate_per_s        numeric     CHECK (rate_per_s > 0),
    burst             integer     CHECK (burst > 0),
    tokens            numeric     NOT NULL DEFAULT 0,  -- the rate's bucket
    refilled_at       timestamptz NOT NULL DEFAULT now(),
    -- Claims fair across groups (an outbox's keys) without a limit
    -- (step 022).
    fair              boolean     NOT NULL DEFAULT false
);

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
-- up at every take-over.  A relay member holds its shards as session-level
-- advisory locks (pgoutbox.lease_ns), and the claim checks the epoch
-- (fencing).
CREATE TABLE pgoutbox.shard_leases (
    queue       text    NOT NULL,
    shard       integer NOT NULL,
    epoch       bigint  NOT NULL DEFAULT 0,
    owner       text,
    acquired_at timestamptz,
    PRIMARY KEY (queue, shard)
);

-- The consumer-side inbox: a consumer claims each message id once, inside
-- the transaction that applies the message (pgoutbox.inbox_claim).  Day
-- partitions (inbox_YYYYMMDD, pgoutbox.inbox_maintain) expire without
-- DELETE storms.
CREATE TABLE pgoutbox.inbox (
    consumer    text        NOT NULL,   -- the logical consumer (group)
    message_id  text        NOT NULL,   -- the event id
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id, received_at)
) PARTITION BY RANGE (received_at);

COMMENT ON TABLE pgoutbox.inbox IS
    'Messages a consumer has applied, per day; see pgoutbox.inbox_claim().';

-- Cron: schedules and the record of every tick's outcome.
CREATE TABLE pgoutbox.cron_schedules (
    name         text        PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_.:-]{1,100}$'),
    expr         text        NOT NULL,
    tz           text        NOT NULL DEFAULT 'UTC',
    queue        text        NOT NULL,
    payload      jsonb       NOT NULL DEFAULT '{}',
    overlap      text        NOT NULL DEFAULT 'skip' CHECK (overlap IN ('skip', 'allow')),
    missed       text        NOT NULL DEFAULT 'run_once' CHECK (missed IN ('skip', 'run_once', 'catch_up')),
    catch_up_max integer     NOT NULL DEFAULT 1 CHECK (catch_up_max BETWEEN 1 AND 1000),
    last_tick    timestamptz,          -- the last tick handled: the compare-and-set
    enabled      boolean     NOT NULL DEFAULT true,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- In UTC day partitions (cron_history_YYYYMMDD,
-- pgoutbox.cron_history_maintain).
CREATE TABLE pgoutbox.cron_history (
    name        text        NOT NULL,
    tick        timestamptz NOT NULL,
    outcome     text        NOT NULL,
    reason      text,
    job_id      bigint,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT cron_history_outcome_check1 CHECK (outcome IN ('fired', 'skipped')),
    CONSTRAINT cron_history_pkey1 PRIMARY KEY (name, tick, recorded_at)
) PARTITION BY RANGE (recorded_at);

COMMENT ON TABLE pgoutbox.cron_history IS
    'One row per cron tick handled (fired or skipped), in UTC day partitions.';

-- Adopted tables (`pgoutbox adopt`): one row per adopted table, the map as
-- SQL expressions over the table's row, each one already of the type the
-- relay reads (text, timestamptz).  pgoutbox.unadopt() removes exactly
-- what `added` lists.
CREATE TABLE pgoutbox.adopted (
    name        text        PRIMARY KEY,
    tbl         regclass    NOT NULL,
    tbl_sql     text        NOT NULL,  -- "schema"."table"
    event_id    text        NOT NULL,  -- quoted bigint column: the event id
    topic_sql   text        NOT NULL,
    key_sql     text        NOT NULL,
    type_sql    text        NOT NULL,
    payload_sql text        NOT NULL,
    headers_sql text        NOT NULL,
    created_sql text        NOT NULL,
    pending_sql text        NOT NULL,  -- 'true' when every row is pending
    done_sql    text        NOT NULL,  -- 'delete' or an assignment list
    channel     text        NOT NULL,  -- what the relay LISTENs on
    shard_col   text,                  -- quoted, NULL: concurrent mode only
    shards      integer     NOT NULL,
    map         jsonb       NOT NULL,  -- the flags as given, for status
    added       jsonb       NOT NULL,  -- [{kind, name}] in the order added
    adopted_at  timestamptz NOT NULL DEFAULT now()
);

-- Events of adopted tables that failed at least once: retried (run_at),
-- halted (run_at infinity), dead-lettered (dead, run_at infinity), or held
-- back behind a failed event of their key.  A claim skips an event whose
-- row says run_at > now(), and in the ordered modes every later event of
-- the same key while a live (not dead) row of the key waits.
CREATE TABLE pgoutbox.adopted_state (
    queue      text        NOT NULL,
    id         bigint      NOT NULL,
    key        text,
    shard      integer,
    attempts   integer     NOT NULL DEFAULT 0,
    run_at     timestamptz NOT NULL DEFAULT now(),
    last_error text,
    dead       boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (queue, id)
);
CREATE INDEX adopted_state_key ON pgoutbox.adopted_state (queue, key, id);

-- The publication the relays of WAL queues name to pgoutput (docs/wal.md).
-- The relays of WAL queues stream logical messages only, which pgoutput
-- sends whatever the publication holds, but it must name one that
-- exists, and one that existed before the slot it decodes (its catalog
-- is read as of the WAL it decodes): made here, before any slot.  The
-- tables adopted with capture wal (docs/adopt.md) join it, so it is one
-- publication for them too (a publication made with the slot would not
-- exist yet in the WAL written just before), and it publishes inserts
-- only: a row's insert is its event; a partition's as its root's (the
-- table adopted), so publish_via_partition_root.  At a wal_level below
-- logical
-- PostgreSQL warns that it would publish nothing, which is true and
-- harmless.
SET LOCAL client_min_messages = error;
CREATE PUBLICATION pgoutbox_wal WITH (publish = 'insert', publish_via_partition_root = true);
RESET client_min_messages;
