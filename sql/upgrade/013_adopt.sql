-- 013_adopt: relay an outbox table the application already has.
--
-- `pgoutbox adopt SCHEMA.TABLE --name NAME` calls pgoutbox.adopt(): it
-- checks the table and the column map, and adds, in the caller's
-- transaction, only what the relay needs, recording each object in
-- pgoutbox.adopted.added so that pgoutbox.unadopt() removes exactly that:
--   - a bigint event id column (pgoutbox_seq, an identity) when the
--     table's id is not an integer (Debezium's uuid): every sink's dedup
--     key is a bigint event id, and ordered claims go by it;
--   - the shard column (pgoutbox_shard) for the ordered modes, unless
--     shards is 0;
--   - an index on the pending rows by event id, unless one exists;
--   - a statement trigger that notifies pgoutbox_<name>, unless the
--     application notifies a channel of its own (p_channel).
-- The relay (src/lib/relay/adopted.c) reads the map and builds its claim
-- and settle statements from it.  A claim reads pending rows and leaves
-- them as they are; the settle round applies the map's `done` (DELETE, or
-- the UPDATE it names) to the events the sink acknowledged, in the claim
-- transaction.  Retries, held-back and halted events and dead letters are
-- kept in pgoutbox.adopted_state, keyed by event id: the application's
-- table changes only by `done`.  A dead-lettered row stays pending in the
-- application's table and is never claimed again while its state row
-- says so.

ALTER TABLE pgoutbox.queues DROP CONSTRAINT queues_kind_check;
ALTER TABLE pgoutbox.queues ADD CONSTRAINT queues_kind_check
    CHECK (kind IN ('outbox', 'work', 'adopted'));

-- One row per adopted table: the map, as SQL expressions over the table's
-- row, each one already of the type the relay reads (text, timestamptz).
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

-- The wake-up trigger of an adopted table: the channel of the adopted
-- name (TG_ARGV[0]), not of the table.
CREATE FUNCTION pgoutbox.notify_adopted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pgoutbox_' || TG_ARGV[0], '');
    RETURN NULL;
END $$;

-- A payload or header text as jsonb for dead letters: the JSON it holds,
-- or the text itself as a JSON string when it is not JSON.
CREATE FUNCTION pgoutbox.adopted_jsonb(t text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN t::jsonb;
EXCEPTION WHEN others THEN
    RETURN to_jsonb(t);
END $$;

-- The type of expression e over table tbl (aliased t), or an error naming
-- the flag.
CREATE FUNCTION pgoutbox.adopt_type(tbl text, flag text, e text) RETURNS regtype
LANGUAGE plpgsql AS $$
DECLARE
    ty regtype;
    msg text;
BEGIN
    EXECUTE format('SELECT pg_typeof((SELECT (%s) FROM %s LIMIT 0))', e, tbl) INTO ty;
    RETURN ty;
EXCEPTION WHEN others THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
    RAISE EXCEPTION 'pgoutbox adopt: %: "%" does not work on %: %', flag, e, tbl, msg
        USING ERRCODE = 'invalid_parameter_value';
END $$;

-- A flag's value as SQL: a column of the table (quoted), or an expression.
-- A bare name that is no column is an error naming the flag.
CREATE FUNCTION pgoutbox.adopt_expr(rel regclass, flag text, v text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute a
                WHERE a.attrelid = rel AND a.attname = v AND a.attnum > 0 AND NOT a.attisdropped) THEN
        RETURN format('%I', v);
    END IF;
    IF v ~ '^[A-Za-z_][A-Za-z0-9_]*$' AND lower(v) NOT IN ('true', 'false', 'null') THEN
        RAISE EXCEPTION 'pgoutbox adopt: %: % has no column %; pass % COLUMN, an expression, or a quoted constant such as % "''orders''" (the defaults are the columns of Debezium''s outbox: id, aggregatetype, aggregateid, type, payload)',
            flag, rel, v, flag, flag USING ERRCODE = 'undefined_column';
    END IF;
    RETURN v;
END $$;

-- Adopts table p_table as queue p_name; returns one line per object it
-- added (and warnings).  Raises, changing nothing, when the table or the
-- map does not fit.  Defaults follow Debezium's outbox (aggregatetype,
-- aggregateid, type, payload; every row pending, deleted once sent).
CREATE FUNCTION pgoutbox.adopt(p_table text, p_name text,
                               p_id text DEFAULT NULL, p_topic text DEFAULT NULL,
                               p_key text DEFAULT NULL, p_type text DEFAULT NULL,
                               p_payload text DEFAULT NULL, p_headers text DEFAULT NULL,
                               p_created_at text DEFAULT NULL, p_pending text DEFAULT NULL,
                               p_done text DEFAULT NULL, p_channel text DEFAULT NULL,
                               p_shards integer DEFAULT 64)
RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    rel      regclass;
    tbl      text;
    nsp      text;
    relname  text;
    idcol    text := coalesce(p_id, 'id');
    idtype   regtype;
    eid      text;
    topic    text;
    key      text;
    typ      text;
    payload  text;
    headers  text;
    created  text;
    pending  text := coalesce(nullif(btrim(p_pending), ''), 'true');
    done     text := coalesce(nullif(btrim(p_done), ''), 'delete');
    ty       regtype;
    msg      text;
    added    jsonb := '[]';
    shardcol text;
    pred     text;
    idx      text;
    trg      text;
    st       record;
BEGIN
    -- The name.
    IF p_name IS NULL OR p_name !~ '^[a-z_][a-z0-9_]*$' OR length(p_name) > 48 OR p_name LIKE 'pg\_%' THEN
        RAISE EXCEPTION 'pgoutbox adopt: invalid name "%": use a lower-case identifier of at most 48 characters ([a-z_][a-z0-9_]*, not pg_...)', p_name
            USING ERRCODE = 'invalid_name';
    END IF;
    IF EXISTS (SELECT 1 FROM pgoutbox.queues q WHERE q.name = p_name)
       OR EXISTS (SELECT 1 FROM pgoutbox.adopted a WHERE a.name = p_name)
       OR to_regclass(format('pgoutbox.%I', p_name)) IS NOT NULL THEN
        RAISE EXCEPTION 'pgoutbox adopt: the name "%" is taken (a queue or adopted table of that name exists); choose another --name, or `pgoutbox unadopt %` first', p_name, p_name
            USING ERRCODE = 'duplicate_object';
    END IF;
    IF p_shards IS NULL OR p_shards NOT BETWEEN 0 AND 4096 THEN
        RAISE EXCEPTION 'pgoutbox adopt: --shards must be between 0 (concurrent mode only) and 4096, not %', p_shards
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The table.
    BEGIN
        rel := p_table::regclass;
    EXCEPTION WHEN others THEN
        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
        RAISE EXCEPTION 'pgoutbox adopt: no table %: %', p_table, msg
            USING ERRCODE = 'undefined_table';
    END;
    SELECT n.nspname, c.relname INTO nsp, relname
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = rel AND c.relkind IN ('r', 'p');
    IF relname IS NULL THEN
        RAISE EXCEPTION 'pgoutbox adopt: % is not a table', p_table USING ERRCODE = 'wrong_object_type';
    END IF;
    IF nsp = 'pgoutbox' THEN
        RAISE EXCEPTION 'pgoutbox adopt: % is one of pgoutbox''s own tables', p_table
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    tbl := format('%I.%I', nsp, relname);
    SELECT a.name INTO msg FROM pgoutbox.adopted a WHERE a.tbl = rel;
    IF msg IS NOT NULL THEN
        RAISE EXCEPTION 'pgoutbox adopt: % is adopted already, as "%"', tbl, msg
            USING ERRCODE = 'duplicate_object';
    END IF;
    topic := pgoutbox.adopt_expr(rel, '--topic', coalesce(p_topic, 'aggregatetype'));
    key := pgoutbox.adopt_expr(rel, '--key', coalesce(p_key, 'aggregateid'));
    typ := pgoutbox.adopt_expr(rel, '--type', coalesce(p_type, 'type'));
    payload := pgoutbox.adopt_expr(rel, '--payload', coalesce(p_payload, 'payload'));
    IF NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = rel AND i.indisprimary) THEN
        RAISE EXCEPTION 'pgoutbox adopt: % has no primary key: the relay marks and finds rows by their id, so the table needs one (ALTER TABLE % ADD PRIMARY KEY (%))', tbl, tbl, idcol
            USING ERRCODE = 'invalid_table_definition';
    END IF;
    SELECT a.atttypid::regtype INTO idtype FROM pg_attribute a
     WHERE a.attrelid = rel AND a.attname = idcol AND a.attnum > 0 AND NOT a.attisdropped;
    IF idtype IS NULL THEN
        RAISE EXCEPTION 'pgoutbox adopt: --id: % has no column "%"', tbl, idcol
            USING ERRCODE = 'undefined_column';
    END IF;
    IF idtype IN ('bigint'::regtype, 'integer'::regtype, 'smallint'::regtype) THEN
        eid := format('%I', idcol);
    ELSE
        eid := 'pgoutbox_seq';
    END IF;
    FOREACH msg IN ARRAY ARRAY['pgoutbox_seq', 'pgoutbox_shard'] LOOP
        IF EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = rel AND a.attname = msg
                      AND a.attnum > 0 AND NOT a.attisdropped) THEN
            RAISE EXCEPTION 'pgoutbox adopt: % already has a column %: is it adopted under another name?', tbl, msg
                USING ERRCODE = 'duplicate_column';
        END IF;
    END LOOP;
    -- The map, flag by flag.
    PERFORM pgoutbox.adopt_type(tbl, '--topic', topic);
    PERFORM pgoutbox.adopt_type(tbl, '--key', key);
    PERFORM pgoutbox.adopt_type(tbl, '--type', typ);
    ty := pgoutbox.adopt_type(tbl, '--payload', payload);
    IF ty IN ('jsonb'::regtype, 'json'::regtype, 'text'::regtype, 'character varying'::regtype) THEN
        payload := format('(%s)::text', payload);
    ELSIF ty = 'bytea'::regtype THEN
        payload := format('convert_from(%s, ''UTF8'')', payload);
    ELSE
        RAISE EXCEPTION 'pgoutbox adopt: --payload: % is of type %; it must be json, jsonb, text or bytea', payload, ty
            USING ERRCODE = 'datatype_mismatch';
    END IF;
    IF p_headers IS NULL THEN
        -- The application's own id travels as a header when it is not
        -- the event id (Debezium's uuid).
        headers := CASE WHEN eid = 'pgoutbox_seq'
                        THEN format('jsonb_build_object(''outbox_id'', (%I)::text)::text', idcol)
                        ELSE '''{}''' END;
    ELSE
        headers := pgoutbox.adopt_expr(rel, '--headers', p_headers);
        ty := pgoutbox.adopt_type(tbl, '--headers', headers);
        IF ty NOT IN ('jsonb'::regtype, 'json'::regtype) THEN
            RAISE EXCEPTION 'pgoutbox adopt: --headers: % is of type %; it must be json or jsonb (an object)', headers, ty
                USING ERRCODE = 'datatype_mismatch';
        END IF;
        headers := format('coalesce((%s)::jsonb, ''{}'')::text', headers);
    END IF;
    IF p_created_at IS NULL THEN
        created := 'now()';
    ELSE
        created := pgoutbox.adopt_expr(rel, '--created-at', p_created_at);
        ty := pgoutbox.adopt_type(tbl, '--created-at', created);
        IF ty NOT IN ('timestamp with time zone'::regtype, 'timestamp without time zone'::regtype, 'date'::regtype) THEN
            RAISE EXCEPTION 'pgoutbox adopt: --created-at: % is of type %; it must be a timestamp', created, ty
                USING ERRCODE = 'datatype_mismatch';
        END IF;
        created := format('(%s)::timestamptz', created);
    END IF;
    ty := pgoutbox.adopt_type(tbl, '--pending', pending);
    IF ty <> 'boolean'::regtype THEN
        RAISE EXCEPTION 'pgoutbox adopt: --pending: % is of type %; it must be a condition (e.g. sent_at IS NULL)', pending, ty
            USING ERRCODE = 'datatype_mismatch';
    END IF;
    IF lower(done) <> 'delete' THEN
        IF pending = 'true' THEN
            RAISE EXCEPTION 'pgoutbox adopt: --done "%" marks rows, so --pending must say which rows are not sent yet (e.g. --pending "sent_at IS NULL")', done
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        BEGIN
            EXECUTE format('EXPLAIN UPDATE %s SET %s WHERE false', tbl, done);
        EXCEPTION WHEN others THEN
            GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
            RAISE EXCEPTION 'pgoutbox adopt: --done: "%" is not delete nor an assignment that works on %: %', done, tbl, msg
                USING ERRCODE = 'invalid_parameter_value';
        END;
    ELSE
        done := 'delete';
    END IF;
    IF p_channel IS NOT NULL AND (p_channel = '' OR length(p_channel) > 63) THEN
        RAISE EXCEPTION 'pgoutbox adopt: --channel must be a channel name of 1 to 63 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- What the relay needs, added.
    IF eid = 'pgoutbox_seq' THEN
        EXECUTE format('ALTER TABLE %s ADD COLUMN pgoutbox_seq bigint GENERATED BY DEFAULT AS IDENTITY', tbl);
        added := added || jsonb_build_object('kind', 'column', 'name', 'pgoutbox_seq');
        RETURN NEXT format('column %s.pgoutbox_seq: the event id (bigint, in insert order), since %s is %s', tbl, idcol, idtype);
    END IF;
    IF p_shards > 0 THEN
        shardcol := 'pgoutbox_shard';
        BEGIN
            EXECUTE format('ALTER TABLE %s ADD COLUMN pgoutbox_shard integer GENERATED ALWAYS AS '
                           '((CASE WHEN ((%s)::text) IS NULL THEN %s %% %L '
                           'ELSE ((hashtextextended((%s)::text, %L) %% %L) + %L) %% %L END)::integer) STORED',
                           tbl, key, eid, p_shards::text, key, '0', p_shards::text, p_shards::text, p_shards::text);
        EXCEPTION WHEN others THEN
            GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
            RAISE EXCEPTION 'pgoutbox adopt: --key: the shard column of the ordered modes is computed from the key "%", which cannot be: %; use a column or an immutable expression, or --shards 0 for the concurrent mode only', key, msg
                USING ERRCODE = 'invalid_parameter_value';
        END;
        added := added || jsonb_build_object('kind', 'column', 'name', 'pgoutbox_shard');
        RETURN NEXT format('column %s.pgoutbox_shard: the key''s shard (of %s) for the ordered modes', tbl, p_shards);
    END IF;
    -- The index on pending rows, unless the table has one already: the
    -- predicate is read back as PostgreSQL prints it (through a CHECK
    -- constraint that is never validated) and compared with each index's.
    IF pending = 'true' THEN
        pred := NULL;
    ELSE
        BEGIN
            EXECUTE format('ALTER TABLE %s ADD CONSTRAINT pgoutbox_adopt_probe CHECK (%s) NOT VALID', tbl, pending);
        EXCEPTION WHEN others THEN
            GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
            RAISE EXCEPTION 'pgoutbox adopt: --pending: "%" cannot be used: %', pending, msg
                USING ERRCODE = 'invalid_parameter_value';
        END;
        SELECT pg_get_expr(c.conbin, c.conrelid) INTO pred FROM pg_constraint c
         WHERE c.conrelid = rel AND c.conname = 'pgoutbox_adopt_probe';
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT pgoutbox_adopt_probe', tbl);
    END IF;
    SELECT ic.relname INTO idx FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
     WHERE i.indrelid = rel AND i.indisvalid AND i.indexprs IS NULL
       AND i.indkey[0] = (SELECT a.attnum FROM pg_attribute a WHERE a.attrelid = rel
                            AND format('%I', a.attname) = eid AND NOT a.attisdropped)
       AND pg_get_expr(i.indpred, i.indrelid) IS NOT DISTINCT FROM pred
     LIMIT 1;
    IF idx IS NULL THEN
        idx := left('pgoutbox_' || p_name || '_pending', 63);
        BEGIN
            EXECUTE format('CREATE INDEX %I ON %s (%s)%s', idx, tbl, eid,
                           CASE WHEN pred IS NULL THEN '' ELSE ' WHERE ' || pending END);
        EXCEPTION WHEN others THEN
            GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
            RAISE EXCEPTION 'pgoutbox adopt: the index on pending rows (% WHERE %) cannot be created: %', eid, pending, msg
                USING ERRCODE = 'invalid_parameter_value';
        END;
        added := added || jsonb_build_object('kind', 'index', 'name', idx);
        RETURN NEXT format('index %I.%I on %s (%s)%s: the pending rows in event id order', nsp, idx, tbl, eid,
                           CASE WHEN pred IS NULL THEN '' ELSE ' WHERE ' || pending END);
    ELSE
        RETURN NEXT format('(index %I.%I already covers the pending rows: none added)', nsp, idx);
    END IF;
    IF p_channel IS NULL THEN
        trg := left('pgoutbox_' || p_name || '_notify', 63);
        EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %s FOR EACH STATEMENT '
                       'EXECUTE FUNCTION pgoutbox.notify_adopted(%L)', trg, tbl, p_name);
        added := added || jsonb_build_object('kind', 'trigger', 'name', trg);
        RETURN NEXT format('trigger %I on %s: NOTIFY %I at each inserting statement''s commit', trg, tbl, 'pgoutbox_' || p_name);
    ELSE
        RETURN NEXT format('(no trigger: the relay listens on the application''s channel %I)', p_channel);
    END IF;
    -- Rows that vanish as fast as they come: Debezium-style producers that
    -- delete the row in the transaction that inserts it.
    SELECT s.n_tup_ins, s.n_tup_del, s.n_live_tup INTO st
      FROM pg_stat_user_tables s WHERE s.relid = rel;
    IF st.n_tup_ins > 0 AND st.n_tup_del >= st.n_tup_ins THEN
        RETURN NEXT format('WARNING: every row ever inserted into %s was deleted again (%s inserted, %s deleted). '
                           'If the application deletes each row in the transaction that inserts it (Debezium''s '
                           'outbox with log-based capture), no row is ever visible to a relay: pgoutbox cannot relay '
                           'such events; the application must leave the row for the relay to delete (--done delete)',
                           tbl, st.n_tup_ins, st.n_tup_del);
    END IF;

    INSERT INTO pgoutbox.queues (name, shards, kind) VALUES (p_name, greatest(p_shards, 1), 'adopted');
    INSERT INTO pgoutbox.shard_leases (queue, shard)
    SELECT p_name, s FROM generate_series(-1, greatest(p_shards, 1) - 1) s;
    INSERT INTO pgoutbox.adopted (name, tbl, tbl_sql, event_id, topic_sql, key_sql, type_sql,
                                  payload_sql, headers_sql, created_sql, pending_sql, done_sql,
                                  channel, shard_col, shards, map, added)
    VALUES (p_name, rel, tbl, eid, format('(%s)::text', topic), format('(%s)::text', key),
            format('(%s)::text', typ), payload, headers, created, pending, done,
            coalesce(p_channel, 'pgoutbox_' || p_name), shardcol, p_shards,
            jsonb_strip_nulls(jsonb_build_object('id', idcol, 'topic', topic, 'key', key, 'type', typ,
                               'payload', coalesce(p_payload, 'payload'), 'headers', p_headers,
                               'created_at', p_created_at, 'pending', p_pending, 'done', done,
                               'channel', p_channel)),
            added);
    RETURN NEXT format('adopted %s as "%s": relay it with `pgoutbox relay --queue %s`%s', tbl, p_name, p_name,
                       CASE WHEN p_shards = 0 THEN ' --mode concurrent' ELSE '' END);
END $$;

-- Removes what adopt added (in reverse order) and the map; the
-- application's rows stay as they are.  Dead letters stay in
-- pgoutbox.dead_letters; the retry bookkeeping goes.
CREATE FUNCTION pgoutbox.unadopt(p_name text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    a   pgoutbox.adopted;
    obj jsonb;
    nsp text;
BEGIN
    SELECT * INTO a FROM pgoutbox.adopted x WHERE x.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgoutbox unadopt: nothing is adopted as "%"', p_name
            USING ERRCODE = 'undefined_object';
    END IF;
    SELECT n.nspname INTO nsp FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = a.tbl;
    FOR obj IN SELECT e FROM jsonb_array_elements(a.added) WITH ORDINALITY AS x(e, n) ORDER BY n DESC LOOP
        CASE obj->>'kind'
        WHEN 'trigger' THEN
            EXECUTE format('DROP TRIGGER %I ON %s', obj->>'name', a.tbl);
        WHEN 'index' THEN
            EXECUTE format('DROP INDEX %I.%I', nsp, obj->>'name');
        WHEN 'column' THEN
            EXECUTE format('ALTER TABLE %s DROP COLUMN %I', a.tbl, obj->>'name');
        END CASE;
        RETURN NEXT format('dropped %s %s', obj->>'kind', obj->>'name');
    END LOOP;
    DELETE FROM pgoutbox.adopted_state s WHERE s.queue = p_name;
    DELETE FROM pgoutbox.relays r WHERE r.queue = p_name;
    DELETE FROM pgoutbox.shard_leases l WHERE l.queue = p_name;
    DELETE FROM pgoutbox.queues q WHERE q.name = p_name;
    DELETE FROM pgoutbox.adopted x WHERE x.name = p_name;
    RETURN NEXT format('unadopted "%s" (%s)', p_name, a.tbl);
END $$;

-- The map of an adopted table, for relays: readable by any role that may
-- use the schema (the map is no secret; a relay role then needs no grant
-- to find out whether its queue is an adopted table).
CREATE FUNCTION pgoutbox.adopted_map(p_name text) RETURNS SETOF pgoutbox.adopted
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT * FROM pgoutbox.adopted a WHERE a.name = p_name
$$;

-- The pending events of an adopted table as `pgoutbox status` reads a
-- queue: run_at, attempts and last_error from the bookkeeping; dead
-- letters left out (they are in pgoutbox.dead_letters).  The caller needs
-- SELECT on the table.
CREATE FUNCTION pgoutbox.adopted_pending(p_name text)
RETURNS TABLE (id bigint, topic text, key text, created_at timestamptz, shard integer,
               run_at timestamptz, attempts integer, last_error text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    a pgoutbox.adopted;
BEGIN
    SELECT * INTO a FROM pgoutbox.adopted x WHERE x.name = p_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgoutbox: nothing is adopted as "%"', p_name USING ERRCODE = 'undefined_object';
    END IF;
    -- The map's expressions see the table alone (no column of the
    -- bookkeeping may capture their names).
    RETURN QUERY EXECUTE format(
        'SELECT c.id, c.topic, c.key, c.created_at, c.shard, coalesce(s.run_at, now()), '
        'coalesce(s.attempts, 0), s.last_error FROM (SELECT t.%1$s::bigint, %2$s, %3$s, %4$s, %5$s '
        'FROM %6$s t WHERE (%7$s)) c(id, topic, key, created_at, shard) '
        'LEFT JOIN pgoutbox.adopted_state s ON s.queue = %8$L AND s.id = c.id WHERE s.dead IS NOT TRUE',
        a.event_id, a.topic_sql, a.key_sql, a.created_sql,
        coalesce('t.' || a.shard_col, '0'), a.tbl_sql, a.pending_sql, p_name);
END $$;

REVOKE ALL ON FUNCTION pgoutbox.adopt(text, text, text, text, text, text, text, text, text, text, text, text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgoutbox.unadopt(text) FROM PUBLIC;
