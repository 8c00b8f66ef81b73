# Migrations: step by step from the first schema, pending events are kept
# (and get their shard), concurrent migrate runs are safe, --to is checked.
. "$(dirname "$0")/../lib.sh"
psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS t_migrate" -c "CREATE DATABASE t_migrate" >/dev/null
export DATABASE_URL=$(pg_url t_migrate)
"$PGO_BIN" migrate --to 1 | grep -q 'from version 0 to 1' || fail "migrate --to 1"
q "SELECT pgoutbox.send('t', 'user-' || i, 'x', jsonb_build_object('i', i)) FROM generate_series(1, 500) i" >/dev/null
q "SELECT pgoutbox.send('t', NULL, 'x', '{}')" >/dev/null
latest=$("$PGO_BIN" --version | sed 's/.*schema version \([0-9]*\).*/\1/')
"$PGO_BIN" migrate | grep -q "from version 1 to $latest" || fail "migrate to latest"
[ "$(pending)" = 501 ] || fail "pending after migrating: $(pending)"
[ "$(q "SELECT count(*) FROM pgoutbox.outbox WHERE shard = pgoutbox.shard_of(key, id, 64) AND shard BETWEEN 0 AND 63")" = 501 ] || fail "shards not computed for pending events"
# The shard column holds shard_of's expression written in (007_send_path):
# the same values for new rows and for new work queues.
q "SELECT pgoutbox.create_queue('t_migrate_jobs', 10)" >/dev/null
q "SELECT pgoutbox.enqueue('t_migrate_jobs', '{}', key => CASE WHEN i % 3 = 0 THEN NULL ELSE 'k' || i END) FROM generate_series(1, 30) i" >/dev/null
[ "$(q "SELECT count(*) FROM pgoutbox.t_migrate_jobs WHERE shard = pgoutbox.shard_of(key, id, 10)")" = 30 ] || fail "work queue shards differ from shard_of"
q "DELETE FROM pgoutbox.shard_leases WHERE queue = 't_migrate_jobs'; DELETE FROM pgoutbox.queues WHERE name = 't_migrate_jobs'; DROP TABLE pgoutbox.t_migrate_jobs" >/dev/null
"$PGO_BIN" migrate | grep -q "up to date (version $latest)" || fail "second migrate not idempotent"
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
