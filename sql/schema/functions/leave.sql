-- Leaves cleanly: releases every lease of this session and the member row.
CREATE OR REPLACE FUNCTION pgoutbox.leave(p_queue text, p_member text) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns integer := pgoutbox.lease_ns(p_queue);
    s  integer;
BEGIN
    FOR s IN SELECT DISTINCT l.objid::bigint::bit(32)::integer FROM pg_catalog.pg_locks l
              WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
                AND l.classid = ns::oid AND l.pid = pg_backend_pid() LOOP
        PERFORM pg_advisory_unlock(ns, s);
    END LOOP;
    DELETE FROM pgoutbox.relays r WHERE r.queue = p_queue AND r.member = p_member;
END $$;
