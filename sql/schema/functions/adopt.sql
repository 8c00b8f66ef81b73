-- Adopts table p_table as queue p_name; returns one line per object it
-- added (and warnings).  Raises, changing nothing, when the table or the
-- map does not fit.  Defaults follow Debezium's outbox (aggregatetype,
-- aggregateid, type, payload; every row pending, deleted once sent).
-- p_capture 'wal': the relay streams the table's inserts from the slot
-- pgoutbox_<name> (the table joins the publication pgoutbox_wal), so a
-- row the producer deletes in its own transaction is still relayed;
-- the rows are never read nor marked, so --pending, --done and
-- --channel do not apply.  The slot is made first, while this
-- transaction has written nothing (PostgreSQL's rule): call it in a
-- transaction of its own.
CREATE OR REPLACE FUNCTION pgoutbox.adopt(p_table text, p_name text,
                               p_id text DEFAULT NULL, p_topic text DEFAULT NULL,
                               p_key text DEFAULT NULL, p_type text DEFAULT NULL,
                               p_payload text DEFAULT NULL, p_headers text DEFAULT NULL,
                               p_created_at text DEFAULT NULL, p_pending text DEFAULT NULL,
                               p_done text DEFAULT NULL, p_channel text DEFAULT NULL,
                               p_shards integer DEFAULT 64, p_capture text DEFAULT 'table')
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
    wal      boolean := p_capture = 'wal';
    slot     text := 'pgoutbox_' || p_name;
    made     boolean := false;  -- this call made the slot
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
    IF p_capture IS NULL OR p_capture NOT IN ('table', 'wal') THEN
        RAISE EXCEPTION 'pgoutbox adopt: --capture must be table or wal, not %', coalesce(p_capture, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF wal THEN
        IF current_setting('wal_level') <> 'logical' THEN
            RAISE EXCEPTION 'pgoutbox adopt: --capture wal needs wal_level = logical, and this server runs wal_level = %', current_setting('wal_level')
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Set wal_level = logical (ALTER SYSTEM SET wal_level = logical, or in postgresql.conf) and restart PostgreSQL; max_replication_slots and max_wal_senders must leave room for one slot and one sender.';
        END IF;
        IF p_pending IS NOT NULL OR p_done IS NOT NULL OR p_channel IS NOT NULL THEN
            RAISE EXCEPTION 'pgoutbox adopt: --capture wal relays each row''s insert from the WAL and never reads nor marks the rows: --pending, --done and --channel do not apply (delete the rows in the application, or leave them)'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        p_shards := 0;  -- one relay streams, in commit order: no shards
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

    -- What the relay needs, added.  Capture wal: the slot first (this
    -- transaction has written nothing yet), then no insert may commit
    -- before this transaction does (SHARE), so that every insert the
    -- slot decodes from now on sees the table in the publication.
    IF wal THEN
        -- Slot names are the cluster's: one of another database is not
        -- ours to stream.  One of this database (left by a queue or an
        -- adoption of this name) decodes nothing of this table from
        -- before this transaction: it is kept.
        SELECT s.database INTO msg FROM pg_replication_slots s WHERE s.slot_name = slot;
        IF msg IS DISTINCT FROM current_database() AND msg IS NOT NULL
           OR EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.slot_name = slot AND s.database IS NULL) THEN
            RAISE EXCEPTION 'pgoutbox adopt: --capture wal: the replication slot % exists already, for database % (slot names are the cluster''s): choose another --name, or drop that slot', slot, coalesce(msg, '(none: a physical slot)')
                USING ERRCODE = 'duplicate_object';
        END IF;
        IF NOT pg_has_role((SELECT c.relowner FROM pg_class c WHERE c.oid = rel), 'USAGE')
           OR NOT pg_has_role((SELECT p.pubowner FROM pg_publication p WHERE p.pubname = 'pgoutbox_wal'), 'USAGE') THEN
            RAISE EXCEPTION 'pgoutbox adopt: --capture wal adds % to the publication pgoutbox_wal: run adopt as a role that owns both (the pgoutbox schema''s owner, or a superuser)', tbl
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF msg IS NULL THEN
            BEGIN
                PERFORM pg_create_logical_replication_slot(slot, 'pgoutput');
                made := true;
            EXCEPTION WHEN others THEN
                GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
                RAISE EXCEPTION 'pgoutbox adopt: --capture wal: cannot create the replication slot %: % (call adopt in a transaction of its own, as a role with REPLICATION)', slot, msg
                    USING ERRCODE = 'object_not_in_prerequisite_state';
            END;
        END IF;
        added := added || jsonb_build_object('kind', 'slot', 'name', slot);
        RETURN NEXT format('replication slot %s (pgoutput): the table''s inserts, kept until a relay confirms them', slot);
    END IF;
    -- A slot is not transactional: dropped again if what follows fails.
    BEGIN
    IF wal THEN
        EXECUTE format('LOCK TABLE %s IN SHARE MODE', tbl);
        EXECUTE format('ALTER PUBLICATION pgoutbox_wal ADD TABLE %s', tbl);
        added := added || jsonb_build_object('kind', 'publication', 'name', 'pgoutbox_wal');
        RETURN NEXT format('publication pgoutbox_wal: publishes the inserts of %s', tbl);
    END IF;
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
    IF wal THEN
        NULL;  -- nothing is claimed: no index, no trigger
    ELSIF pending = 'true' THEN
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
    IF NOT wal THEN
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
    END IF;
    -- Rows that vanish as fast as they come: Debezium-style producers that
    -- delete the row in the transaction that inserts it.
    SELECT s.n_tup_ins, s.n_tup_del, s.n_live_tup INTO st
      FROM pg_stat_user_tables s WHERE s.relid = rel;
    IF NOT wal AND st.n_tup_ins > 0 AND st.n_tup_del >= st.n_tup_ins THEN
        RETURN NEXT format('WARNING: every row ever inserted into %s was deleted again (%s inserted, %s deleted). '
                           'If the application deletes each row in the transaction that inserts it (Debezium''s '
                           'outbox with log-based capture), no row is ever visible to a relay: pgoutbox cannot relay '
                           'such events from the table; adopt it with --capture wal (the relay reads the inserts '
                           'from the WAL), or the application must leave the row for the relay to delete (--done delete)',
                           tbl, st.n_tup_ins, st.n_tup_del);
    END IF;

    INSERT INTO pgoutbox.queues (name, shards, kind, capture)
    VALUES (p_name, greatest(p_shards, 1), 'adopted', p_capture);
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
                               'channel', p_channel,
                               'capture', CASE WHEN wal THEN 'wal' END)),
            added);
    RETURN NEXT format('adopted %s as "%s"%s: relay it with `pgoutbox relay --queue %s`%s', tbl, p_name,
                       CASE WHEN wal THEN ' (capture wal: inserts committed from now on)' ELSE '' END, p_name,
                       CASE WHEN p_shards = 0 AND NOT wal THEN ' --mode concurrent' ELSE '' END);
    EXCEPTION WHEN others THEN
        IF made THEN
            PERFORM pg_drop_replication_slot(slot);
        END IF;
        RAISE;
    END;
END $$;
