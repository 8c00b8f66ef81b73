# Rolling upgrades (issue 38): `pgoutbox migrate` from two hosts at once
# on one database.  Both exit 0; one does the work (the advisory lock
# serializes them, the second finds the schema current); the schema is
# the one a single run makes (pg_dump --schema-only, as t_schema_equiv),
# each version recorded once.  From nothing, and from version 18 (the
# released 0.1.0's) under a producer, nothing sent is lost.
. "$(dirname "$0")/../lib.sh"
PG_DUMP=$(pg_bindir)/pg_dump
latest=$("$PGO_BIN" --version | sed 's/.*schema version \([0-9]*\).*/\1/')
[ "$latest" -ge 19 ] || fail "schema version from --version: '$latest'"

newdb() {
	PGOPTIONS='-c client_min_messages=warning' psql -XAtq "$(pg_url postgres)" \
		-c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null
}
dump() {
	"$PG_DUMP" --schema-only "$(pg_url "$1")" | grep -Ev '^\\(un)?restrict '
	psql -XAtq "$(pg_url "$1")" -c "SELECT name, shards, kind FROM pgoutbox.queues ORDER BY name" \
		-c "SELECT max(version) FROM pgoutbox.migrations"
}
# race DB: two migrate runs at once; both exit 0, exactly one applies.
race() {
	local db=$1 a b rc=0
	"$PGO_BIN" migrate --db "$(pg_url "$db")" >"$T_TMP/$db.a" 2>&1 &
	a=$!
	"$PGO_BIN" migrate --db "$(pg_url "$db")" >"$T_TMP/$db.b" 2>&1 &
	b=$!
	wait "$a" || rc=$?
	[ "$rc" = 0 ] || fail "first migrate of $db exit $rc: $(cat "$T_TMP/$db.a")"
	wait "$b" || rc=$?
	[ "$rc" = 0 ] || fail "second migrate of $db exit $rc: $(cat "$T_TMP/$db.b")"
	[ "$(cat "$T_TMP/$db.a" "$T_TMP/$db.b" | grep -c "to $latest")" = 1 ] ||
		fail "not exactly one run did the work: $(cat "$T_TMP/$db.a" "$T_TMP/$db.b")"
	[ "$(psql -XAtq "$(pg_url "$db")" -c "SELECT count(*) - count(DISTINCT version) FROM pgoutbox.migrations")" = 0 ] ||
		fail "a version recorded twice in $db"
}

newdb t_umr_ref
"$PGO_BIN" migrate --db "$(pg_url t_umr_ref)" >/dev/null 2>"$T_TMP/ref.log" || fail "migrate: $(cat "$T_TMP/ref.log")"
dump t_umr_ref >"$T_TMP/ref.sql"
grep -q 'CREATE TABLE pgoutbox.outbox' "$T_TMP/ref.sql" || fail "empty dump: $(head "$T_TMP/ref.sql")"

newdb t_umr_fresh
race t_umr_fresh
dump t_umr_fresh >"$T_TMP/fresh.sql"
diff -u "$T_TMP/ref.sql" "$T_TMP/fresh.sql" >"$T_TMP/fresh.diff" || fail "racing installs differ: $(head -60 "$T_TMP/fresh.diff")"

# From 18 (as `migrate --to 18` leaves it; the released 0.1.0 wrote the
# same steps) while a producer sends.
newdb t_umr_18
"$PGO_BIN" migrate --db "$(pg_url t_umr_18)" --to 18 >/dev/null 2>"$T_TMP/18.log" || fail "migrate --to 18: $(cat "$T_TMP/18.log")"
export DATABASE_URL
DATABASE_URL=$(pg_url t_umr_18)
make_aggregates
PRODUCERS=()
start_producer 4 0.002
sleep 1
race t_umr_18
for p in "${PRODUCERS[@]}"; do wait "$p" || fail "the producer failed: $(cat "$T_TMP"/producer.*.log)"; done
[ "$(q 'SELECT count(*) FROM pgoutbox.outbox')" = "$(q 'SELECT sum(version) FROM agg')" ] ||
	fail "outbox holds $(q 'SELECT count(*) FROM pgoutbox.outbox') events, $(q 'SELECT sum(version) FROM agg') committed"
q "DROP PROCEDURE produce; DROP TABLE agg; TRUNCATE pgoutbox.outbox"
dump t_umr_18 >"$T_TMP/18.sql"
diff -u "$T_TMP/ref.sql" "$T_TMP/18.sql" >"$T_TMP/18.diff" || fail "racing upgrades from 18 differ: $(head -60 "$T_TMP/18.diff")"
