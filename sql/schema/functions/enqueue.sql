-- Enqueues a job inside the caller's transaction and returns its id.  With
-- a unique_key, a job with the same key still in the queue (pending or
-- running) is not duplicated: its id is returned instead.  Once that job is
-- done (deleted) the key is free again.  group_key names the job's group
-- (a tenant, an account): pgoutbox.set_queue's group_concurrency caps the
-- jobs of one group running at once, and claims are fair across groups.
-- depends_on names jobs of the same queue (their ids) that must be done
-- first: the job is not claimed while any of them is still in the queue
-- or in its dead letters (deps_cond.sql); an id in neither counts as
-- done.  A dead dependency holds the job until it is retried and done,
-- or discarded.
CREATE OR REPLACE FUNCTION pgoutbox.enqueue(queue text, payload jsonb,
                                 run_at timestamptz DEFAULT now(),
                                 priority integer DEFAULT 0,
                                 unique_key text DEFAULT NULL,
                                 topic text DEFAULT 'job',
                                 key text DEFAULT NULL,
                                 group_key text DEFAULT NULL,
                                 depends_on bigint[] DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    new_id bigint;
    deps   bigint[] := CASE WHEN cardinality(depends_on) > 0 THEN depends_on END;
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
        EXECUTE format('INSERT INTO pgoutbox.%I (topic, key, payload, run_at, priority, group_key, depends_on) '
                       'VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id', enqueue.queue)
           INTO new_id
          USING coalesce(topic, 'job'), key, payload, coalesce(run_at, now()), coalesce(priority, 0),
                group_key, deps;
        RETURN new_id;
    END IF;
    -- The existing job may complete between the conflict and the lookup:
    -- then insert again.
    FOR i IN 1..10 LOOP
        EXECUTE format('INSERT INTO pgoutbox.%I (topic, key, payload, run_at, priority, unique_key, group_key, depends_on) '
                       'VALUES ($1, $2, $3, $4, $5, $6, $7, $8) '
                       'ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING '
                       'RETURNING id', enqueue.queue)
           INTO new_id
          USING coalesce(topic, 'job'), key, payload, coalesce(run_at, now()),
                coalesce(priority, 0), unique_key, group_key, deps;
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

COMMENT ON FUNCTION pgoutbox.enqueue(text, jsonb, timestamptz, integer, text, text, text, text, bigint[]) IS
    'Enqueues a job in the caller''s transaction; with unique_key, returns the id of the job already queued under that key.';
