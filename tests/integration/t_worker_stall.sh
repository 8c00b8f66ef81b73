# An --exec worker's database connections through a TCP proxy that stops
# forwarding (SIGSTOP: nothing closes, nothing answers): a round waiting
# for its reply gives up after database.statement_timeout + --lease (1 s
# + 2 s here) and says so, its connects through the stalled proxy give
# up after database.connect_timeout; once the proxy forwards again the worker
# reconnects by itself and every job is done (at least once: a job whose
# completion the stall held back may run again).
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create ex >/dev/null || fail "queue create"
python3 "$(dirname "$0")/../tcp_proxy.py" "$PG_PORT" "$T_TMP/proxy.port" &
PROXY=$!
PIDS+=("$PROXY")
wait_until 10 "[ -s '$T_TMP/proxy.port' ]"
PROXY_URL="host=127.0.0.1 port=$(cat "$T_TMP/proxy.port") user=postgres dbname=$(basename "$0" .sh)"
N=400
q "SELECT count(pgoutbox.enqueue('ex', jsonb_build_object('i', i))) FROM generate_series(1, $N) i" >/dev/null
PGOUTBOX_DATABASE_STATEMENT_TIMEOUT=1s PGOUTBOX_DATABASE_CONNECT_TIMEOUT=2s "$PGO_BIN" worker --db "$PROXY_URL" --queue ex \
	--exec "cat >> $T_TMP/ran; echo >> $T_TMP/ran; sleep 0.01" --concurrency 4 --lease 2s \
	--poll-interval 200ms 2>"$T_TMP/w.log" &
W=$!; PIDS+=("$W")
left() { q "SELECT count(*) FROM pgoutbox.ex"; }
wait_until 30 '[ "$(left)" -le $((N - 50)) ]'
kill -STOP "$PROXY"
stalled=$(date +%s%N)
wait_until 15 'grep -q "no reply from PostgreSQL within 3000 ms" "$T_TMP/w.log"'
noticed=$((($(date +%s%N) - stalled) / 1000000))
wait_until 15 'grep -q "no answer to connecting within 2000 ms" "$T_TMP/w.log"'
kill -0 "$W" || fail "the worker died during the stall: $(tail -5 "$T_TMP/w.log")"
kill -CONT "$PROXY"
wait_until 60 '[ "$(left)" = 0 ]'
kill -0 "$W" || fail "the worker exited"
stop_relay "$W"
done_n=$(grep -o '"i": *[0-9]*' "$T_TMP/ran" | sort -u | wc -l)
[ "$done_n" = $N ] || fail "$done_n of $N jobs ran"
note "stall noticed in $noticed ms (limit 3000 ms); all $N jobs done after it, $(grep -o '"i": *[0-9]*' "$T_TMP/ran" | wc -l) runs"
