# The C callback API (pgo_worker_t with a handler): 300 jobs done once
# each, a job the handler refuses is retried and dead-lettered with the
# handler's message; SIGTERM stops the worker.
. "$(dirname "$0")/../lib.sh"
t_db
CB=$(dirname "$PGO_BIN")/tests/worker_cb
[ -x "$CB" ] || fail "$CB not built"
"$PGO_BIN" queue create cb >/dev/null || fail "queue create"
q "SELECT count(pgoutbox.enqueue('cb', jsonb_build_object('i', i))) FROM generate_series(1, 300) i" >/dev/null
bad=$(q "SELECT pgoutbox.enqueue('cb', '{\"fail\": true}')")
"$CB" cb "$T_TMP/runs" >"$T_TMP/stats" 2>"$T_TMP/cb.log" &
P=$!; PIDS+=($!)
wait_until 30 '[ "$(q "SELECT count(*) FROM pgoutbox.cb")" = 0 ]'
stop_relay "$P"
[ "$(cat "$T_TMP/stats")" = "300 1 1 0" ] || fail "stats (done failed dead lost): $(cat "$T_TMP/stats")"
[ "$(grep -cv "^$bad " "$T_TMP/runs")" = 300 ] && [ "$(grep -v "^$bad " "$T_TMP/runs" | cut -d' ' -f1 | sort -u | wc -l)" = 300 ] || fail "jobs not run exactly once"
[ "$(grep "^$bad " "$T_TMP/runs" | cut -d' ' -f2 | tr '\n' ' ')" = "1 2 " ] || fail "refused job attempts: $(grep "^$bad " "$T_TMP/runs")"
[ "$(q "SELECT attempts, last_error FROM pgoutbox.dead_letters WHERE queue = 'cb'")" = "2|callback refused job $bad" ] || fail "dead letter: $(q 'SELECT * FROM pgoutbox.dead_letters')"
for c in queue worker cron run; do
	"$PGO_BIN" "$c" --help >"$T_TMP/help" || fail "$c --help exited non-zero"
	grep -q "usage: pgoutbox $c" "$T_TMP/help" || fail "$c --help has no usage line"
done
