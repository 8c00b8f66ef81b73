# Migrations: step by step from the first schema, pending events are kept
# (and are relayed), concurrent migrate runs are safe, --to is checked.
. "$(dirname "$0")/../lib.sh"
psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS t_migrate" -c "CREATE DATABASE t_migrate" >/dev/null
export DATABASE_URL=$(pg_url t_migrate)
"$PGO_BIN" migrate --to 1 | qgrep 'from version 0 to 1' || fail "migrate --to 1"
q "SELECT pgoutbox.send('t', 'user-' || i, 'x', jsonb_build_object('i', i)) FROM generate_series(1, 500) i" >/dev/null
q "SELECT pgoutbox.send('t', NULL, 'x', '{}')" >/dev/null
latest=$("$PGO_BIN" --version | sed 's/.*schema version \([0-9]*\).*/\1/')
"$PGO_BIN" migrate | qgrep "from version 1 to $latest" || fail "migrate to latest"
[ "$(pending)" = 501 ] || fail "pending after migrating: $(pending)"
# 017_lighter_rows: no stored shard (the relay computes it, as
# shard_of), the fields as domains; a queue created later gets the same
# shape, and its checks hold.
shape="SELECT string_agg(attname || ' ' || format_type(atttypid, NULL), ', ' ORDER BY attnum) FROM pg_attribute WHERE attnum > 0 AND NOT attisdropped AND attrelid = "
want="id bigint, topic pgoutbox.event_topic, key pgoutbox.event_key, type pgoutbox.event_type, payload pgoutbox.event_payload, headers pgoutbox.event_headers"
[ "$(q "$shape 'pgoutbox.outbox'::regclass AND attnum <= 6")" = "$want" ] || fail "outbox columns: $(q "$shape 'pgoutbox.outbox'::regclass")"
[ "$(q "SELECT count(*) FROM pg_attribute WHERE attrelid = 'pgoutbox.outbox'::regclass AND attname = 'shard'")" = 0 ] || fail "outbox still has a shard column"
[ "$(q "SELECT count(*) FROM pg_constraint WHERE conrelid = 'pgoutbox.outbox'::regclass AND contype = 'c'")" = 0 ] || fail "outbox still has table checks"
q "SELECT pgoutbox.create_queue('t_migrate_jobs', 10)" >/dev/null
[ "$(q "$shape 'pgoutbox.t_migrate_jobs'::regclass AND attnum <= 6")" = "$want" ] || fail "new work queue columns: $(q "$shape 'pgoutbox.t_migrate_jobs'::regclass")"
[ "$(q "SELECT count(*) FROM pg_attribute WHERE attrelid = 'pgoutbox.t_migrate_jobs'::regclass AND attname = 'shard'")" = 0 ] || fail "new work queue has a shard column"
q "SELECT pgoutbox.enqueue('t_migrate_jobs', '{}', key => CASE WHEN i % 3 = 0 THEN NULL ELSE 'k' || i END) FROM generate_series(1, 30) i" >/dev/null
rc=0; q "SELECT pgoutbox.enqueue('t_migrate_jobs', '{}', key => repeat('k', 1025))" 2>"$T_TMP/err" >/dev/null || rc=$?
[ "$rc" != 0 ] && grep -q 'event_key_max_1024' "$T_TMP/err" || fail "a 1025-byte key in a new queue: $rc $(cat "$T_TMP/err")"
q "DELETE FROM pgoutbox.shard_leases WHERE queue = 't_migrate_jobs'; DELETE FROM pgoutbox.queues WHERE name = 't_migrate_jobs'; DROP TABLE pgoutbox.t_migrate_jobs" >/dev/null
"$PGO_BIN" migrate | qgrep "up to date (version $latest)" || fail "second migrate not idempotent"
rc=0; "$PGO_BIN" migrate --to 99 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -q 'not a schema version' "$T_TMP/err" || fail "--to 99: $rc $(cat "$T_TMP/err")"
# Three migrate runs at once on a fresh database: one does the work.
psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS t_migrate2" -c "CREATE DATABASE t_migrate2" >/dev/null
mpids=()
for i in 1 2 3; do "$PGO_BIN" migrate --db "$(pg_url t_migrate2)" >"$T_TMP/m$i" 2>&1 & mpids+=($!); done
for p in "${mpids[@]}"; do wait "$p" || fail "a concurrent migrate failed: $(cat "$T_TMP"/m*)"; done
[ "$(cat "$T_TMP"/m* | grep -c 'migrated from version 0')" = 1 ] || fail "concurrent migrate: $(cat "$T_TMP"/m*)"
start_relay "$T_TMP/out" --sink stdout
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(ids_of "$T_TMP/out" | sort -u | wc -l)" = 501 ] || fail "relayed $(ids_of "$T_TMP/out" | sort -u | wc -l) of 501"
