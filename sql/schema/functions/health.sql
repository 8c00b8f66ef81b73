-- Health: what pins the xmin horizon (so vacuum cannot reclaim the queue's
-- deleted rows) and how many dead tuples the queue tables carry.
CREATE OR REPLACE FUNCTION pgoutbox.health(p_min_age interval DEFAULT '1 minute',
                                p_dead_tuples bigint DEFAULT 100000)
RETURNS TABLE (kind text, subject text, age interval, detail text)
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp  -- sees every session's xmin
AS $$
    SELECT 'xmin', format('pid %s (%s)', a.pid, coalesce(nullif(a.application_name, ''), a.usename::text)),
           now() - a.xact_start,
           format('%s transaction open for %s holds back vacuum (xmin age %s)',
                  a.state, date_trunc('second', now() - a.xact_start), age(a.backend_xmin))
      FROM pg_catalog.pg_stat_activity a
     WHERE a.backend_xmin IS NOT NULL AND a.pid <> pg_backend_pid()
       AND a.xact_start < now() - p_min_age
    UNION ALL
    SELECT 'slot', s.slot_name, NULL::interval,
           format('replication slot (%s, %s) pins xmin age %s',
                  s.slot_type, CASE WHEN s.active THEN 'active' ELSE 'inactive' END,
                  greatest(age(s.xmin), age(s.catalog_xmin)))
      FROM pg_catalog.pg_replication_slots s
     WHERE s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL
    UNION ALL
    SELECT 'dead_tuples', format('pgoutbox.%s', t.relname), NULL::interval,
           format('%s dead tuples (%s live); last autovacuum %s',
                  t.n_dead_tup, t.n_live_tup, coalesce(t.last_autovacuum::text, 'never'))
      FROM pg_catalog.pg_stat_user_tables t
     WHERE t.schemaname = 'pgoutbox' AND t.n_dead_tup >= p_dead_tuples
     ORDER BY 1, 3 DESC NULLS LAST
$$;
