-- 018_send_lean: send() without a search path of its own (issue 17).
--
-- A function's SET clause is applied at every call and undone at its
-- end: the GUC nest level, the setting parsed and assigned, and the
-- namespace search path recomputed twice (for the function and for its
-- caller's next statement).  pgbench, 8 clients of one send() per
-- transaction into the outbox, three interleaved rounds of 5 s
-- (docs/benchmarks.md, "Late morning of 2026-12-03"): 13,572-13,974 tps as
-- in 001; 14,163-14,950 without SET search_path; 14,626-14,991 with its
-- four checks in one IF as well.
--
-- send() stays SECURITY DEFINER (a producer role needs EXECUTE only), so
-- what it names must not depend on its caller's search path, which can
-- put a schema of the caller's before pg_catalog: every function and
-- operator it uses is qualified with pg_catalog (OPERATOR(pg_catalog.=)),
-- and the only relation it names is schema-qualified (a temporary table
-- cannot take its place).  The rest is bound by OID when it was created:
-- the column defaults, the domains' checks, the indexes.  The statement
-- trigger of the outbox runs inside send() as send()'s owner, with the
-- same search path: wake_relay() below qualifies its operator as well.
-- tests/integration/t_definer_shadow.sh calls send() with a schema of
-- look-alike operators and functions ahead of pg_catalog, and fails if
-- any of them ran.
--
-- The messages and SQLSTATEs of 001 are kept: one IF tests every check,
-- and only a call that fails one of them looks for which.

CREATE OR REPLACE FUNCTION pgoutbox.send(topic text, key text, type text, payload jsonb,
                                         headers jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    new_id bigint;
BEGIN
    IF topic IS NULL OR topic OPERATOR(pg_catalog.=) '' OR payload IS NULL
       OR pg_catalog.pg_column_size(payload) OPERATOR(pg_catalog.>) 1048576
       OR (headers IS NOT NULL
           AND pg_catalog.jsonb_typeof(headers) OPERATOR(pg_catalog.<>) 'object') THEN
        IF topic IS NULL OR topic OPERATOR(pg_catalog.=) '' THEN
            RAISE EXCEPTION 'pgoutbox.send: topic must not be empty'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF payload IS NULL THEN
            RAISE EXCEPTION 'pgoutbox.send: payload must not be NULL (use ''null''::jsonb)'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF pg_catalog.pg_column_size(payload) OPERATOR(pg_catalog.>) 1048576 THEN
            RAISE EXCEPTION 'pgoutbox.send: payload is % bytes, the limit is 1048576',
                pg_catalog.pg_column_size(payload) USING ERRCODE = 'program_limit_exceeded';
        END IF;
        RAISE EXCEPTION 'pgoutbox.send: headers must be a JSON object, not %',
            pg_catalog.jsonb_typeof(headers) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
    VALUES (topic, key, coalesce(type, ''), payload, coalesce(headers, '{}'))
    RETURNING id INTO new_id;
    RETURN new_id;
END $$;

-- CREATE OR REPLACE keeps the grants and the comment; 011's SET clause
-- goes with the old definition.

-- 015's trigger function, its operator qualified: it runs as the owner of
-- send() inside it, with the caller's search path.
CREATE OR REPLACE FUNCTION pgoutbox.wake_relay() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Runs with the caller's search path (as send()'s owner inside
    -- send()): everything qualified.
    IF NOT pg_catalog.pg_try_advisory_xact_lock_shared(
               pg_catalog.hashtext('pgoutbox.wake.' OPERATOR(pg_catalog.||) TG_TABLE_NAME), 0) THEN
        PERFORM pg_catalog.pg_notify('pgoutbox_' OPERATOR(pg_catalog.||) TG_TABLE_NAME, '');
    END IF;
    RETURN NULL;
END $$;
