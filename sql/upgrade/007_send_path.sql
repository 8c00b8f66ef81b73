-- 007_send_path: a cheaper insert path for send(), INSERT and COPY.
--
-- The generated `shard` column called pgoutbox.shard_of(key, id, shards).
-- PostgreSQL inlines that SQL function, but it does so each time an INSERT
-- or COPY starts executing (ExecInitStoredGenerated plans the expression
-- anew, and inlining parses and analyses the function's body): a profile
-- of one send() per transaction put 13 % of the backend's samples there
-- (docs/benchmarks.md, "Where the time goes").  The column now holds the
-- very expression of shard_of with the queue's shard count written in, so
-- nothing is parsed per statement.  The values do not change:
-- shard = pgoutbox.shard_of(key, id, shards) holds for every row, and
-- shard_of stays for SQL that computes a key's shard.
--
-- A column's generation expression cannot be altered in PostgreSQL 15, so
-- the column is dropped and added again: a rewrite of each queue table
-- under an exclusive lock, in the migration's transaction.  Pending events
-- keep their ids and get the same shard as before.

-- The generation expression of a queue with `shards` shards: the body of
-- pgoutbox.shard_of with the count as a constant.  The constants are
-- written as bigint literals ('64', not 64) so that the stored expression
-- holds no casts: PostgreSQL reads it back from its text form and plans
-- it at the start of every INSERT and COPY, and its length is what that
-- costs (182k instructions per INSERT with casts folded, 216k without,
-- 269k through shard_of, measured with callgrind).
CREATE FUNCTION pgoutbox.shard_expr(shards integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT format('(CASE WHEN key IS NULL THEN id %% %1$L '
                  'ELSE ((hashtextextended(key, %2$L) %% %1$L) + %1$L) %% %1$L END)::integer',
                  shards::text, '0')
$$;

DO $$
DECLARE
    q record;
BEGIN
    FOR q IN SELECT name, shards FROM pgoutbox.queues ORDER BY name LOOP
        IF to_regclass(format('pgoutbox.%I', q.name)) IS NULL THEN
            CONTINUE;
        END IF;
        EXECUTE format('ALTER TABLE pgoutbox.%I DROP COLUMN shard, '
                       'ADD COLUMN shard integer GENERATED ALWAYS AS (%s) STORED',
                       q.name, pgoutbox.shard_expr(q.shards));
    END LOOP;
END $$;

-- Work queues created from now on get the same column (004_queues, with
-- only the shard column changed).
CREATE OR REPLACE FUNCTION pgoutbox.create_queue(name text, shards integer DEFAULT 64)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog
AS $$
DECLARE
    q text := create_queue.name;
BEGIN
    IF q IS NULL OR q !~ '^[a-z_][a-z0-9_]*$' OR length(q) > 48 OR q LIKE 'pg\_%' THEN
        RAISE EXCEPTION 'pgoutbox.create_queue: invalid queue name "%": use a lower-case identifier of at most 48 characters ([a-z_][a-z0-9_]*, not pg_...)', q
            USING ERRCODE = 'invalid_name';
    END IF;
    IF shards IS NULL OR shards NOT BETWEEN 1 AND 4096 THEN
        RAISE EXCEPTION 'pgoutbox.create_queue: shards must be between 1 and 4096, not %', shards
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM pgoutbox.queues x WHERE x.name = q)
       OR to_regclass(format('pgoutbox.%I', q)) IS NOT NULL THEN
        RAISE EXCEPTION 'pgoutbox.create_queue: queue (or table) pgoutbox.% already exists', q
            USING ERRCODE = 'duplicate_table';
    END IF;
    EXECUTE format($f$
        CREATE TABLE pgoutbox.%1$I (
            id           bigserial   PRIMARY KEY,
            topic        text        NOT NULL DEFAULT 'job' CHECK (topic <> ''),
            key          text,
            type         text        NOT NULL DEFAULT '',
            payload      jsonb       NOT NULL,
            headers      jsonb       NOT NULL DEFAULT '{}',
            created_at   timestamptz NOT NULL DEFAULT now(),
            run_at       timestamptz NOT NULL DEFAULT now(),
            attempts     integer     NOT NULL DEFAULT 0,
            last_error   text,
            locked_by    text,
            locked_until timestamptz,
            priority     integer     NOT NULL DEFAULT 0,
            unique_key   text,
            epoch        bigint      NOT NULL DEFAULT 0,  -- lease fencing token
            shard        integer GENERATED ALWAYS AS (%2$s) STORED,
            CONSTRAINT %3$I CHECK (pg_column_size(payload) <= 1048576),
            CONSTRAINT %4$I CHECK (jsonb_typeof(headers) = 'object')
        )$f$, q, pgoutbox.shard_expr(shards), q || '_payload_max_1mib', q || '_headers_object');
    EXECUTE format('CREATE UNIQUE INDEX %I ON pgoutbox.%I (unique_key) WHERE unique_key IS NOT NULL',
                   q || '_unique_key', q);
    EXECUTE format('CREATE INDEX %I ON pgoutbox.%I (priority DESC, id)', q || '_claim', q);
    EXECUTE format('CREATE INDEX %I ON pgoutbox.%I (locked_until) WHERE locked_until IS NOT NULL',
                   q || '_leased', q);
    EXECUTE format('ALTER TABLE pgoutbox.%I SET (autovacuum_vacuum_scale_factor = 0.01, '
                   'autovacuum_vacuum_insert_scale_factor = 0.05)', q);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON pgoutbox.%I '
                   'FOR EACH STATEMENT EXECUTE FUNCTION pgoutbox.notify_outbox()', q || '_notify', q);
    INSERT INTO pgoutbox.queues (name, shards, kind) VALUES (q, shards, 'work');
    INSERT INTO pgoutbox.shard_leases (queue, shard)
    SELECT q, s FROM generate_series(-1, shards - 1) s;
END $$;
