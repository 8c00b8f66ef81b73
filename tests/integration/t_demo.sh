# `make demo DB=...` on the user's database (issue 20 item 2): it never
# stops a server, not even with PG_DIR and PG_PORT of the user's own
# cluster in the environment, and it can be run twice.
. "$(dirname "$0")/../lib.sh"
t_db
root=$(cd "$(dirname "$0")/../.." && pwd)
for run in 1 2; do
	rc=0
	PG_DIR=$PG_DIR PG_PORT=$PG_PORT "$root/scripts/demo.sh" --db "$DATABASE_URL" --bin "$PGO_BIN" \
		>"$T_TMP/demo$run.out" 2>&1 || rc=$?
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" status >/dev/null ||
		{ pg_start_again; fail "demo run $run stopped the server it was given"; }
	[ "$rc" = 0 ] || fail "demo run $run: exit $rc: $(tail -20 "$T_TMP/demo$run.out")"
	grep -q 'done: 102 events relayed' "$T_TMP/demo$run.out" || fail "demo run $run: $(tail -5 "$T_TMP/demo$run.out")"
done
[ "$(q "SELECT count(*) FROM pgoutbox_demo_orders")" = 202 ] || fail "orders: $(q "SELECT count(*) FROM pgoutbox_demo_orders")"
