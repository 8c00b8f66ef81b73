-- 004_queues: named work queues (lease claims with a fencing epoch,
-- priorities, unique keys) and the distributed cron scheduler's tables.
--
-- A work queue is a table pgoutbox.<name> with the outbox's columns plus
-- priority, unique_key and epoch.  It is registered in pgoutbox.queues
-- (kind 'work') and pgoutbox.shard_leases like the outbox, so the relay can
-- also drain it.  Its statement trigger notifies 'pgoutbox_<name>'.

ALTER TABLE pgoutbox.queues
    ADD COLUMN kind text NOT NULL DEFAULT 'outbox' CHECK (kind IN ('outbox', 'work'));

-- Creates a work queue.  The name follows pgo_ident_check(): a lower-case
-- identifier of at most 48 characters, not starting with pg_.
CREATE FUNCTION pgoutbox.create_queue(name text, shards integer DEFAULT 64)
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
            shard        integer GENERATED ALWAYS AS (pgoutbox.shard_of(key, id, %2$s)) STORED,
            CONSTRAINT %3$I CHECK (pg_column_size(payload) <= 1048576),
            CONSTRAINT %4$I CHECK (jsonb_typeof(headers) = 'object')
        )$f$, q, shards, q || '_payload_max_1mib', q || '_headers_object');
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

-- Enqueues a job inside the caller's transaction and returns its id.  With
-- a unique_key, a job with the same key still in the queue (pending or
-- running) is not duplicated: its id is returned instead.  Once that job is
-- done (deleted) the key is free again.
CREATE FUNCTION pgoutbox.enqueue(queue text, payload jsonb,
                                 run_at timestamptz DEFAULT now(),
                                 priority integer DEFAULT 0,
                                 unique_key text DEFAULT NULL,
                                 topic text DEFAULT 'job',
                                 key text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog
AS $$
DECLARE
    new_id bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgoutbox.queues x
                    WHERE x.name = enqueue.queue AND x.kind = 'work') THEN
        RAISE EXCEPTION 'pgoutbox.enqueue: no work queue named "%" (create it with pgoutbox.create_queue)', enqueue.queue
            USING ERRCODE = 'undefined_table';
    END IF;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.enqueue: payload must not be NULL (use ''null''::jsonb)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_column_size(payload) > 1048576 THEN
        RAISE EXCEPTION 'pgoutbox.enqueue: payload is % bytes, the limit is 1048576',
            pg_column_size(payload) USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF unique_key IS NULL THEN
        EXECUTE format('INSERT INTO pgoutbox.%I (topic, key, payload, run_at, priority) '
                       'VALUES ($1, $2, $3, $4, $5) RETURNING id', enqueue.queue)
           INTO new_id
          USING coalesce(topic, 'job'), key, payload, coalesce(run_at, now()), coalesce(priority, 0);
        RETURN new_id;
    END IF;
    -- The existing job may complete between the conflict and the lookup:
    -- then insert again.
    FOR i IN 1..10 LOOP
        EXECUTE format('INSERT INTO pgoutbox.%I (topic, key, payload, run_at, priority, unique_key) '
                       'VALUES ($1, $2, $3, $4, $5, $6) '
                       'ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING '
                       'RETURNING id', enqueue.queue)
           INTO new_id
          USING coalesce(topic, 'job'), key, payload, coalesce(run_at, now()),
                coalesce(priority, 0), unique_key;
        IF new_id IS NOT NULL THEN
            RETURN new_id;
        END IF;
        EXECUTE format('SELECT id FROM pgoutbox.%I WHERE unique_key = $1', enqueue.queue)
           INTO new_id USING unique_key;
        IF new_id IS NOT NULL THEN
            RETURN new_id;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'pgoutbox.enqueue: unique key "%" keeps changing hands', unique_key
        USING ERRCODE = 'serialization_failure';
END $$;

COMMENT ON FUNCTION pgoutbox.enqueue(text, jsonb, timestamptz, integer, text, text, text) IS
    'Enqueues a job in the caller''s transaction; with unique_key, returns the id of the job already queued under that key.';
REVOKE ALL ON FUNCTION pgoutbox.create_queue(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.enqueue(text, jsonb, timestamptz, integer, text, text, text) FROM PUBLIC;

-- The sql handler of `pgoutbox worker --sql FUNC`: claims up to lim due
-- jobs with FOR UPDATE SKIP LOCKED and calls func(payload jsonb) on each
-- in a subtransaction, in THIS transaction: a job's effects commit with its
-- deletion (exactly once).  A failing job's effects are rolled back, its
-- attempt, error and backoff are recorded (or it moves to dead letters
-- after max_attempts); the others of the batch go on.
CREATE FUNCTION pgoutbox.work_sql(queue text, func text, lim integer,
                                  max_attempts integer DEFAULT 10,
                                  base_ms bigint DEFAULT 1000,
                                  max_ms bigint DEFAULT 300000,
                                  OUT claimed integer, OUT done integer,
                                  OUT failed integer, OUT dead integer)
LANGUAGE plpgsql
AS $$
DECLARE
    fn   text;
    job  record;
    err  text;
    wait bigint;
BEGIN
    claimed := 0; done := 0; failed := 0; dead := 0;
    IF to_regprocedure(func || '(jsonb)') IS NULL THEN
        RAISE EXCEPTION 'pgoutbox.work_sql: no function %(jsonb)', func
            USING ERRCODE = 'undefined_function';
    END IF;
    fn := to_regprocedure(func || '(jsonb)')::regproc::text;
    -- Fast path: the whole batch in one statement (in a subtransaction).
    -- If any job fails, it is rolled back (claims included) and the slow
    -- path below runs each job in its own subtransaction.
    BEGIN
        EXECUTE format(
            'WITH c AS (SELECT id, payload FROM pgoutbox.%1$I '
            '            WHERE run_at <= now() AND (locked_until IS NULL OR locked_until < now()) '
            '              AND attempts < $2 '
            '            ORDER BY priority DESC, id LIMIT $1 FOR UPDATE SKIP LOCKED), '
            '     r AS MATERIALIZED (SELECT id, %2$s(payload) IS NULL AS x FROM c), '
            '     d AS (DELETE FROM pgoutbox.%1$I q USING r WHERE q.id = r.id RETURNING 1) '
            'SELECT count(*) FROM d', queue, fn)
           INTO done USING lim, max_attempts;
        claimed := done;
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        done := 0;
    END;
    FOR job IN EXECUTE format(
        'SELECT id, payload, attempts FROM pgoutbox.%I '
        ' WHERE run_at <= now() AND (locked_until IS NULL OR locked_until < now()) '
        '   AND attempts < $2 '
        ' ORDER BY priority DESC, id LIMIT $1 FOR UPDATE SKIP LOCKED', queue)
        USING lim, max_attempts
    LOOP
        claimed := claimed + 1;
        BEGIN
            EXECUTE format('SELECT %s($1)', fn) USING job.payload;
            EXECUTE format('DELETE FROM pgoutbox.%I WHERE id = $1', queue) USING job.id;
            done := done + 1;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS err = MESSAGE_TEXT;
            IF job.attempts + 1 >= max_attempts THEN
                EXECUTE format(
                    'WITH d AS (DELETE FROM pgoutbox.%I WHERE id = $1 RETURNING *) '
                    'INSERT INTO pgoutbox.dead_letters (id, queue, topic, key, type, payload, headers, created_at, attempts, last_error) '
                    'SELECT id, $2, topic, key, type, payload, headers, created_at, attempts + 1, $3 FROM d '
                    'ON CONFLICT (queue, id) DO UPDATE SET attempts = EXCLUDED.attempts, '
                    'last_error = EXCLUDED.last_error, failed_at = now(), payload = EXCLUDED.payload', queue)
                    USING job.id, queue, err;
                dead := dead + 1;
            ELSE
                wait := least(max_ms, base_ms * (2 ^ job.attempts)::bigint);
                wait := wait / 2 + (random() * (wait / 2))::bigint;
                EXECUTE format('UPDATE pgoutbox.%I SET attempts = attempts + 1, last_error = $2, '
                               'run_at = now() + $3 * interval ''1 millisecond'' WHERE id = $1', queue)
                    USING job.id, err, wait;
                failed := failed + 1;
            END IF;
        END;
    END LOOP;
END $$;
REVOKE ALL ON FUNCTION pgoutbox.work_sql(text, text, integer, integer, bigint, bigint) FROM PUBLIC;

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

CREATE TABLE pgoutbox.cron_history (
    name        text        NOT NULL,
    tick        timestamptz NOT NULL,
    outcome     text        NOT NULL CHECK (outcome IN ('fired', 'skipped')),
    reason      text,
    job_id      bigint,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, tick)
);
CREATE INDEX cron_history_recorded ON pgoutbox.cron_history (recorded_at);

-- Handles the ticks (prev, ticks[last]] of one schedule in ONE transaction:
-- the compare-and-set on last_tick (only one scheduler instance wins; the
-- others get 0 and do nothing), then per tick either a job (fire[i]) and a
-- 'fired' row, or a 'skipped' row with reasons[i].  With overlap 'skip' the
-- job's unique_key is 'cron:<name>', and a tick whose previous job is still
-- queued or running is skipped.  Returns the number of jobs enqueued, or -1
-- when another instance had already handled these ticks.
CREATE FUNCTION pgoutbox.cron_fire(p_name text, p_prev bigint, p_ticks bigint[],
                                   p_fire boolean[], p_reasons text[])
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog
AS $$
DECLARE
    s      pgoutbox.cron_schedules;
    n      integer := 0;
    tick   timestamptz;
    job    bigint;
    ukey   text;
    busy   boolean;
BEGIN
    UPDATE pgoutbox.cron_schedules c
       SET last_tick = to_timestamp(p_ticks[array_upper(p_ticks, 1)])
     WHERE c.name = p_name AND c.enabled
       AND c.last_tick IS NOT DISTINCT FROM to_timestamp(p_prev)
    RETURNING c.* INTO s;
    IF NOT FOUND THEN
        RETURN -1;
    END IF;
    ukey := CASE WHEN s.overlap = 'skip' THEN 'cron:' || s.name END;
    FOR i IN 1..array_upper(p_ticks, 1) LOOP
        tick := to_timestamp(p_ticks[i]);
        IF NOT p_fire[i] THEN
            INSERT INTO pgoutbox.cron_history (name, tick, outcome, reason)
            VALUES (p_name, tick, 'skipped', p_reasons[i]);
            CONTINUE;
        END IF;
        busy := false;
        IF ukey IS NOT NULL THEN
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM pgoutbox.%I WHERE unique_key = $1)', s.queue)
               INTO busy USING ukey;
        END IF;
        IF busy THEN
            INSERT INTO pgoutbox.cron_history (name, tick, outcome, reason)
            VALUES (p_name, tick, 'skipped', 'previous run still queued or running');
            CONTINUE;
        END IF;
        EXECUTE format('INSERT INTO pgoutbox.%I (topic, key, type, payload, headers, unique_key) '
                       'VALUES (''cron'', $1, ''cron.tick'', $2, $3, $4) RETURNING id', s.queue)
           INTO job
          USING s.name, s.payload,
                jsonb_build_object('cron', s.name, 'tick', to_char(tick AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
                ukey;
        INSERT INTO pgoutbox.cron_history (name, tick, outcome, reason, job_id)
        VALUES (p_name, tick, 'fired', p_reasons[i], job);
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;
REVOKE ALL ON FUNCTION pgoutbox.cron_fire(text, bigint, bigint[], boolean[], text[]) FROM PUBLIC;
