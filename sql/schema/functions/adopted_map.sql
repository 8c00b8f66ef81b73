-- The map of an adopted table, for relays: readable by any role that may
-- use the schema (the map is no secret; a relay role then needs no grant
-- to find out whether its queue is an adopted table).
CREATE OR REPLACE FUNCTION pgoutbox.adopted_map(p_name text) RETURNS SETOF pgoutbox.adopted
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT * FROM pgoutbox.adopted a WHERE a.name = p_name
$$;
