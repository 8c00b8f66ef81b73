-- send_ablation.sql: the table and function variants behind "Where the time goes:
-- send() and bulk" in docs/benchmarks.md.  Load into a database migrated
-- with `pgoutbox migrate`; everything lands in schema abl (DROP SCHEMA abl CASCADE).
-- abl.ob2 uses the integer-literal form of the shard expression; 007_send_path
-- uses bigint literals (see abl.shard_expr2).
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS abl CASCADE;
CREATE SCHEMA abl;
CREATE TABLE IF NOT EXISTS public.bench_plain (id bigserial PRIMARY KEY, payload jsonb);
-- outbox columns, PK and defaults only
CREATE TABLE abl.wide (
    id bigserial PRIMARY KEY, topic text NOT NULL, key text, type text NOT NULL DEFAULT '',
    payload jsonb NOT NULL, headers jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(), run_at timestamptz NOT NULL DEFAULT now(),
    attempts integer NOT NULL DEFAULT 0, last_error text, locked_by text, locked_until timestamptz);
-- + CHECKs
CREATE TABLE abl.checks (LIKE abl.wide INCLUDING DEFAULTS);
ALTER TABLE abl.checks ADD PRIMARY KEY (id), ADD CHECK (topic <> ''),
  ADD CHECK (pg_column_size(payload) <= 1048576), ADD CHECK (jsonb_typeof(headers) = 'object');
ALTER TABLE abl.checks ALTER id SET DEFAULT nextval('abl.wide_id_seq');
-- + shard via shard_of (SQL function)
CREATE TABLE abl.shard_fn (LIKE abl.wide INCLUDING DEFAULTS, shard integer GENERATED ALWAYS AS (pgoutbox.shard_of(key, id, 64)) STORED);
ALTER TABLE abl.shard_fn ADD PRIMARY KEY (id);
-- + shard as a plain expression
CREATE TABLE abl.shard_expr (LIKE abl.wide INCLUDING DEFAULTS, shard integer GENERATED ALWAYS AS (
   CASE WHEN key IS NULL THEN (id % 64)::integer ELSE (((hashtextextended(key, 0) % 64) + 64) % 64)::integer END) STORED);
ALTER TABLE abl.shard_expr ADD PRIMARY KEY (id);
-- + partial index only
CREATE TABLE abl.pidx (LIKE abl.wide INCLUDING DEFAULTS);
ALTER TABLE abl.pidx ADD PRIMARY KEY (id);
CREATE INDEX ON abl.pidx (key, id) WHERE attempts > 0;
-- + notify trigger only
CREATE TABLE abl.trig (LIKE abl.wide INCLUDING DEFAULTS);
ALTER TABLE abl.trig ADD PRIMARY KEY (id);
CREATE TRIGGER trig_notify AFTER INSERT ON abl.trig FOR EACH STATEMENT EXECUTE FUNCTION pgoutbox.notify_outbox();

-- send() variants, all into pgoutbox.outbox
CREATE FUNCTION abl.send_nosec(topic text, key text, type text, payload jsonb, headers jsonb DEFAULT '{}')
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE new_id bigint;
BEGIN
    IF topic IS NULL OR topic = '' THEN RAISE EXCEPTION 'e' USING ERRCODE = 'invalid_parameter_value'; END IF;
    IF payload IS NULL THEN RAISE EXCEPTION 'e' USING ERRCODE = 'invalid_parameter_value'; END IF;
    IF pg_column_size(payload) > 1048576 THEN RAISE EXCEPTION 'e' USING ERRCODE = 'program_limit_exceeded'; END IF;
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN RAISE EXCEPTION 'e' USING ERRCODE = 'invalid_parameter_value'; END IF;
    INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
    VALUES (topic, key, coalesce(type, ''), payload, coalesce(headers, '{}')) RETURNING id INTO new_id;
    RETURN new_id;
END $$;
CREATE FUNCTION abl.send_secdef_nopath(topic text, key text, type text, payload jsonb, headers jsonb DEFAULT '{}')
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE new_id bigint;
BEGIN
    IF topic IS NULL OR topic = '' THEN RAISE EXCEPTION 'e' USING ERRCODE = 'invalid_parameter_value'; END IF;
    IF payload IS NULL THEN RAISE EXCEPTION 'e' USING ERRCODE = 'invalid_parameter_value'; END IF;
    IF pg_column_size(payload) > 1048576 THEN RAISE EXCEPTION 'e' USING ERRCODE = 'program_limit_exceeded'; END IF;
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN RAISE EXCEPTION 'e' USING ERRCODE = 'invalid_parameter_value'; END IF;
    INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
    VALUES (topic, key, coalesce(type, ''), payload, coalesce(headers, '{}')) RETURNING id INTO new_id;
    RETURN new_id;
END $$;
CREATE FUNCTION abl.send_insonly(topic text, key text, type text, payload jsonb, headers jsonb DEFAULT '{}')
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE new_id bigint;
BEGIN
    INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
    VALUES (topic, key, coalesce(type, ''), payload, coalesce(headers, '{}')) RETURNING id INTO new_id;
    RETURN new_id;
END $$;
CREATE FUNCTION abl.send_sql(topic text, key text, type text, payload jsonb, headers jsonb DEFAULT '{}')
RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
    VALUES (topic, key, coalesce(type, ''), payload, coalesce(headers, '{}')) RETURNING id
$$;
CREATE FUNCTION abl.send_sql_secdef(topic text, key text, type text, payload jsonb, headers jsonb DEFAULT '{}')
RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
    VALUES (topic, key, coalesce(type, ''), payload, coalesce(headers, '{}')) RETURNING id
$$;
CREATE TABLE abl.ob2 (LIKE abl.wide INCLUDING DEFAULTS, shard integer GENERATED ALWAYS AS (
   CASE WHEN key IS NULL THEN (id % 64)::integer ELSE (((hashtextextended(key, 0) % 64) + 64) % 64)::integer END) STORED,
   CHECK (topic <> ''), CHECK (pg_column_size(payload) <= 1048576), CHECK (jsonb_typeof(headers) = 'object'));
ALTER TABLE abl.ob2 ADD PRIMARY KEY (id);
CREATE INDEX ON abl.ob2 (key, id) WHERE attempts > 0;
CREATE TRIGGER ob2_notify AFTER INSERT ON abl.ob2 FOR EACH STATEMENT EXECUTE FUNCTION pgoutbox.notify_outbox();
CREATE OR REPLACE FUNCTION abl.send_ob2(topic text, key text, type text, payload jsonb, headers jsonb DEFAULT '{}')
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE new_id bigint;
BEGIN
    IF topic IS NULL OR topic = '' THEN RAISE EXCEPTION 'e' USING ERRCODE = 'invalid_parameter_value'; END IF;
    IF payload IS NULL THEN RAISE EXCEPTION 'e' USING ERRCODE = 'invalid_parameter_value'; END IF;
    IF pg_column_size(payload) > 1048576 THEN RAISE EXCEPTION 'e' USING ERRCODE = 'program_limit_exceeded'; END IF;
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN RAISE EXCEPTION 'e' USING ERRCODE = 'invalid_parameter_value'; END IF;
    INSERT INTO abl.ob2 (topic, key, type, payload, headers)
    VALUES (topic, key, coalesce(type, ''), payload, coalesce(headers, '{}')) RETURNING id INTO new_id;
    RETURN new_id;
END $$;
CREATE OR REPLACE FUNCTION abl.send_q(topic text, key text, type text, payload jsonb, headers jsonb DEFAULT '{}')
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE new_id bigint;
BEGIN
    IF topic IS NULL OR topic OPERATOR(pg_catalog.=) '' THEN RAISE EXCEPTION 'e' USING ERRCODE = 'invalid_parameter_value'; END IF;
    IF payload IS NULL THEN RAISE EXCEPTION 'e' USING ERRCODE = 'invalid_parameter_value'; END IF;
    IF pg_catalog.pg_column_size(payload) OPERATOR(pg_catalog.>) 1048576 THEN RAISE EXCEPTION 'e' USING ERRCODE = 'program_limit_exceeded'; END IF;
    IF headers IS NOT NULL AND pg_catalog.jsonb_typeof(headers) OPERATOR(pg_catalog.<>) 'object' THEN RAISE EXCEPTION 'e' USING ERRCODE = 'invalid_parameter_value'; END IF;
    INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
    VALUES (topic, key, coalesce(type, ''), payload, coalesce(headers, '{}')) RETURNING id INTO new_id;
    RETURN new_id;
END $$;
CREATE TABLE abl.shard_expr2 (LIKE abl.wide INCLUDING DEFAULTS, shard integer GENERATED ALWAYS AS (
   (CASE WHEN key IS NULL THEN id % '64' ELSE ((hashtextextended(key, '0') % '64') + '64') % '64' END)::integer) STORED);
ALTER TABLE abl.shard_expr2 ADD PRIMARY KEY (id);
-- + the wake-up trigger of 015_send_fast (NOTIFY only while a relay holds
-- or waits for the table's sleeper lock; nobody does here, so it never
-- notifies: the cost of the try itself)
CREATE TABLE abl.trig_wake (LIKE abl.wide INCLUDING DEFAULTS);
ALTER TABLE abl.trig_wake ADD PRIMARY KEY (id);
CREATE TRIGGER trig_wake_notify AFTER INSERT ON abl.trig_wake FOR EACH STATEMENT EXECUTE FUNCTION pgoutbox.wake_relay();

-- Cumulative, as in "Where send()'s own cost goes" (docs/benchmarks.md,
-- night of 2026-12-02/03): abl.wide, then + the stored shard column, + the
-- outbox's 7 CHECK constraints, + its 2 partial indexes; the 7 checks as
-- one; and the 12 columns with topic and headers as domains that hold
-- their checks (a domain's checks are prepared once per backend, a
-- table's at every execution of an INSERT).
CREATE TABLE abl.cum_shard (LIKE abl.wide INCLUDING DEFAULTS, shard integer GENERATED ALWAYS AS (
   CASE WHEN key IS NULL THEN (id % 64)::integer ELSE (((hashtextextended(key, 0) % 64) + 64) % 64)::integer END) STORED);
ALTER TABLE abl.cum_shard ADD PRIMARY KEY (id);
CREATE TABLE abl.cum_checks (LIKE abl.cum_shard INCLUDING ALL);
ALTER TABLE abl.cum_checks ADD CHECK (pg_column_size(headers) <= 65536), ADD CHECK (jsonb_typeof(headers) = 'object'),
  ADD CHECK (octet_length(key) <= 1024), ADD CHECK (pg_column_size(payload) <= 1048576), ADD CHECK (topic <> ''),
  ADD CHECK (octet_length(topic) <= 256), ADD CHECK (octet_length(type) <= 256);
CREATE TABLE abl.cum_pidx (LIKE abl.cum_checks INCLUDING ALL);
CREATE INDEX ON abl.cum_pidx (id) WHERE attempts > 0 OR last_error IS NOT NULL;
CREATE INDEX ON abl.cum_pidx (key, id) WHERE attempts > 0;
CREATE TABLE abl.one_check (LIKE abl.cum_shard INCLUDING ALL);
ALTER TABLE abl.one_check ADD CHECK (pg_column_size(headers) <= 65536 AND jsonb_typeof(headers) = 'object'
  AND octet_length(key) <= 1024 AND pg_column_size(payload) <= 1048576 AND topic <> ''
  AND octet_length(topic) <= 256 AND octet_length(type) <= 256);
CREATE DOMAIN abl.topic_name AS text CHECK (VALUE <> '' AND octet_length(VALUE) <= 256);
CREATE DOMAIN abl.headers_object AS jsonb CHECK (jsonb_typeof(VALUE) = 'object' AND pg_column_size(VALUE) <= 65536);
CREATE TABLE abl.domains (
    id bigserial PRIMARY KEY, topic abl.topic_name NOT NULL, key text, type text NOT NULL DEFAULT '',
    payload jsonb NOT NULL, headers abl.headers_object NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(), run_at timestamptz NOT NULL DEFAULT now(),
    attempts integer NOT NULL DEFAULT 0, last_error text, locked_by text, locked_until timestamptz);
-- pgbench -n -M prepared -c 8 -j 2 -T 5 -f F, F holding one line:
--   INSERT INTO abl.T (topic, key, type, payload) VALUES ('orders', 'k' || (random()*1000)::int,
--     'order.paid', '{"order":12345,"amount":99.5,"status":"paid"}');
