# Through a real PgBouncer (Debian's) in both pool modes.
#   transaction: the runners find out at start.  An ordered or strict relay
#   is refused (exit 2, what to do instead): its shard leases are session
#   advisory locks, which would stay on server connections that producers
#   get next.  A concurrent relay and the workers (exec and sql) run
#   through it with no LISTEN (the poll finds new rows), no named prepared
#   statement and their settings per transaction: everything producers
#   send through the pooler meanwhile is delivered, no "prepared statement
#   does not exist", and nothing of the relay's sessions (settings,
#   advisory locks) stays on the pooled server connections.
#   session: a session is ours; everything works as direct, LISTEN too.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../pgbouncer.sh"
trap 'cleanup_pids; pgbouncer_stop' EXIT
t_db
"$PGO_BIN" queue create jobs >/dev/null
"$PGO_BIN" queue create sq >/dev/null
q "CREATE TABLE done (n int); CREATE FUNCTION rec(p jsonb) RETURNS void LANGUAGE sql AS 'INSERT INTO done VALUES ((p->>''n'')::int)'"
DB=$(basename "$0" .sh)

# $1 events, $1 jobs of each queue, one transaction each, through $B.
produce() {
	local i
	for i in $(seq "$1"); do
		echo "SELECT pgoutbox.send('t', 'k$((i % 13))', 'x', '{\"n\": $i}');"
		echo "SELECT pgoutbox.enqueue('jobs', '{\"n\": $i}');"
		echo "SELECT pgoutbox.enqueue('sq', '{\"n\": $i}');"
	done | psql -XAtq -v ON_ERROR_STOP=1 "$B" >/dev/null
}
left() { q "SELECT (SELECT count(*) FROM pgoutbox.outbox) + (SELECT count(*) FROM pgoutbox.jobs) + (SELECT count(*) FROM pgoutbox.sq)"; }
workers() {
	"$PGO_BIN" worker --db "$B" --queue jobs --exec 'cat >/dev/null' --concurrency 4 --poll-interval 200ms 2>"$T_TMP/$1-exec.log" &
	WE=$!
	"$PGO_BIN" worker --db "$B" --queue sq --sql rec --concurrency 2 --poll-interval 200ms 2>"$T_TMP/$1-sql.log" &
	WS=$!
	PIDS+=("$WE" "$WS")
}
stop_workers() {
	local p
	for p in "$WE" "$WS"; do
		kill -TERM "$p"
		wait "$p" || fail "a worker exited $? after SIGTERM"
	done
}

# --- transaction pooling
pgbouncer_start "$T_TMP/tx" transaction
B=$(bouncer_url "$DB")
for mode in ordered strict; do
	rc=0
	timeout 30 "$PGO_BIN" relay --db "$B" --mode "$mode" --sink stdout >"$T_TMP/refused.out" 2>"$T_TMP/refused.err" || rc=$?
	[ "$rc" = 2 ] || fail "an $mode relay through a transaction pooler: exit $rc, not 2: $(cat "$T_TMP/refused.err")"
	grep -q "goes through a transaction pooler.*the $mode mode needs a session of its own.*connect this relay to PostgreSQL directly" "$T_TMP/refused.err" ||
		fail "$mode relay: $(cat "$T_TMP/refused.err")"
done
[ "$(lease_count)" = 0 ] || fail "shard leases taken through the pooler: $(lease_count)"
start_relay "$T_TMP/tx.out" --db "$B" --mode concurrent --poll-interval 200ms --batch 50 --in-flight 3
workers tx
produce 300
wait_until 60 '[ "$(left)" = 0 ]'
[ "$(ids_of "$T_TMP/tx.out" | sort -u | wc -l)" = 300 ] || fail "relayed $(ids_of "$T_TMP/tx.out" | sort -u | wc -l) of 300 through the pooler"
[ "$(q 'SELECT count(DISTINCT n) FROM done')" = 300 ] || fail "sql worker: $(q 'SELECT count(DISTINCT n) FROM done') of 300"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "dead letters: $(q 'SELECT id, queue, last_error FROM pgoutbox.dead_letters LIMIT 5')"
grep -q 'created_at":"[0-9-]*T[0-9:.]*Z"' "$T_TMP/tx.out" || fail "created_at not in UTC: $(head -1 "$T_TMP/tx.out")"
for log in "$T_TMP/tx.out.log" "$T_TMP"/tx-*.log; do
	grep -q 'prepared statement "' "$log" && fail "$(basename "$log"): $(grep 'prepared statement "' "$log" | head -3)"
	grep -q 'failed' "$log" && fail "$(basename "$log"): $(grep 'failed' "$log" | head -3)"
	[ "$(grep -c 'goes through a transaction pooler.*no LISTEN' "$log")" = 1 ] || fail "$(basename "$log") does not say once that it polls"
done
# Server connections the relay used, now a producer's: none of its settings.
for i in $(seq 10); do
	got=$(psql -XAtq "$B" -c "SELECT current_setting('enable_seqscan') || ' ' || current_setting('statement_timeout') || ' ' || current_setting('TimeZone')")
	[ "$got" = "on 0 $(q 'SHOW TimeZone')" ] || fail "a pooled server connection kept a relay's settings: $got"
done
[ "$(q "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")" = 0 ] || fail "advisory locks left: $(q "SELECT * FROM pg_locks WHERE locktype = 'advisory'")"
stop_relay "$RELAY_PID"
stop_workers
pgbouncer_stop

# --- session pooling: everything, LISTEN included (the fallback poll is
# 30 s, the events must come within 10).
pgbouncer_start "$T_TMP/session" session
B=$(bouncer_url "$DB")
start_relay "$T_TMP/s.out" --db "$B"
wait_until 20 '[ "$(lease_count)" = 64 ]'
workers s
sleep 0.5 # the first claims are done: what follows needs a wake-up
produce 100
wait_until 10 '[ "$(pending)" = 0 ]'
wait_until 20 '[ "$(left)" = 0 ]'
[ "$(ids_of "$T_TMP/s.out" | sort -u | wc -l)" = 100 ] || fail "relayed $(ids_of "$T_TMP/s.out" | sort -u | wc -l) of 100 through a session pool"
[ "$(q 'SELECT count(*) FROM done')" = 400 ] || fail "sql worker in session mode: $(q 'SELECT count(*) FROM done') rows of 400"
for log in "$T_TMP/s.out.log" "$T_TMP"/s-*.log; do
	grep -q 'goes through' "$log" && fail "$(basename "$log") took a session pool for a transaction pooler: $(grep 'goes through' "$log")"
	grep -q 'prepared statement "\|failed' "$log" && fail "$(basename "$log"): $(grep 'prepared statement "\|failed' "$log" | head -3)"
done
stop_relay "$RELAY_PID"
stop_workers
[ "$(lease_count)" = 0 ] || fail "leases left after the relay stopped"
