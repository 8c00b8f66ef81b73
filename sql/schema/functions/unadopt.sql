-- Removes what adopt added (in reverse order) and the map; the
-- application's rows stay as they are.  Dead letters stay in
-- pgoutbox.dead_letters; the retry bookkeeping goes.  Capture wal: the
-- table leaves the publication and the slot goes last (PostgreSQL
-- refuses to drop a slot a relay streams: stop the relays first).
CREATE OR REPLACE FUNCTION pgoutbox.unadopt(p_name text) RETURNS SETOF text
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
        WHEN 'publication' THEN
            IF EXISTS (SELECT 1 FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid
                        WHERE p.pubname = obj->>'name' AND pr.prrelid = a.tbl) THEN
                EXECUTE format('ALTER PUBLICATION %I DROP TABLE %s', obj->>'name', a.tbl);
            END IF;
        WHEN 'slot' THEN
            IF EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.slot_name = obj->>'name'
                          AND s.database = current_database()) THEN
                PERFORM pg_drop_replication_slot(obj->>'name');
            END IF;
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
