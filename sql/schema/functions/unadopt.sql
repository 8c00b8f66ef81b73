-- Removes what adopt added (in reverse order) and the map; the
-- application's rows stay as they are.  Dead letters stay in
-- pgoutbox.dead_letters; the retry bookkeeping goes.
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
