# Upgrade step 019 (queue controls) on a database that has queues: a work
# queue and an outbox of its own made at version 18 end, after migrate,
# as create_queue makes them at 19 (group_key and its index on the work
# queue only; pg_dump --schema-only compared), and a role granted
# EXECUTE on the old enqueue() keeps it on the new signature and can
# enqueue with a group.  (t_schema_equiv compares databases without
# queues.)
. "$(dirname "$0")/../lib.sh"
PG_DUMP=$(pg_bindir)/pg_dump
mk() {
	PGOPTIONS='-c client_min_messages=warning' psql -XAtq "$(pg_url postgres)" \
		-c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null
}
dump() { "$PG_DUMP" --schema-only --no-privileges "$(pg_url "$1")" | grep -Ev '^\\(un)?restrict '; }
mk t_qu_old
mk t_qu_new
"$PGO_BIN" migrate --db "$(pg_url t_qu_old)" --to 18 >/dev/null 2>"$T_TMP/m1.log" || fail "migrate --to 18: $(cat "$T_TMP/m1.log")"
psql -XAtq -v ON_ERROR_STOP=1 "$(pg_url t_qu_old)" >/dev/null <<'SQL' || fail "setup at 18"
SELECT pgoutbox.create_queue('jobs');
SELECT pgoutbox.create_queue('ob', 8, 'outbox');
SELECT pgoutbox.enqueue('jobs', '{"before": true}');
DROP ROLE IF EXISTS t_qu_producer;
CREATE ROLE t_qu_producer LOGIN;
GRANT USAGE ON SCHEMA pgoutbox TO t_qu_producer;
GRANT EXECUTE ON FUNCTION pgoutbox.enqueue(text, jsonb, timestamptz, integer, text, text, text) TO t_qu_producer;
SQL
trap 'cleanup_pids; psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS t_qu_old" -c "DROP ROLE IF EXISTS t_qu_producer" >/dev/null 2>&1 || true' EXIT
"$PGO_BIN" migrate --db "$(pg_url t_qu_old)" >"$T_TMP/m2.out" 2>"$T_TMP/m2.log" || fail "migrate 18 -> 19: $(cat "$T_TMP/m2.log")"
grep -qE 'from version 18 to (19|[2-9][0-9])' "$T_TMP/m2.out" || fail "migrate said: $(cat "$T_TMP/m2.out")"
"$PGO_BIN" migrate --db "$(pg_url t_qu_new)" >/dev/null 2>&1 || fail "migrate fresh"
psql -XAtq -v ON_ERROR_STOP=1 "$(pg_url t_qu_new)" -c "SELECT pgoutbox.create_queue('jobs')" \
	-c "SELECT pgoutbox.create_queue('ob', 8, 'outbox')" >/dev/null || fail "queues at 19"
dump t_qu_old >"$T_TMP/old.sql"
dump t_qu_new >"$T_TMP/new.sql"
diff -u "$T_TMP/new.sql" "$T_TMP/old.sql" >"$T_TMP/diff" || fail "upgraded queues differ: $(head -40 "$T_TMP/diff")"
grep -q 'jobs_group' "$T_TMP/old.sql" || fail "no jobs_group index after the upgrade"
id=$(psql -XAtq -v ON_ERROR_STOP=1 "$(pg_url t_qu_old) user=t_qu_producer" \
	-c "SELECT pgoutbox.enqueue('jobs', '{}', group_key => 'tenant-1')") || fail "the producer lost EXECUTE on enqueue"
[ "$(psql -XAtq "$(pg_url t_qu_old)" -c "SELECT group_key FROM pgoutbox.jobs WHERE id = $id")" = tenant-1 ] ||
	fail "the job has no group"
