# `cron run`'s database connection through a TCP proxy that stops
# forwarding (SIGSTOP: nothing closes, nothing answers): the request in
# flight gives up after database.statement_timeout + 10 s (1 s + 10 s
# here) and says so, the scheduler's connects through the stalled proxy
# give up after database.connect_timeout; once the proxy forwards again
# the schedule goes on, no tick fired twice.  Then SIGTERM during a stall
# ends `cron run` within 2 s, exit 0.
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create ex >/dev/null || fail "queue create"
"$PGO_BIN" cron add beat '* * * * * *' --queue ex --overlap allow --payload '{"i": 0}' >/dev/null || fail "cron add"
python3 "$(dirname "$0")/../tcp_proxy.py" "$PG_PORT" "$T_TMP/proxy.port" &
PROXY=$!
PIDS+=("$PROXY")
wait_until 10 "[ -s '$T_TMP/proxy.port' ]"
PROXY_URL="host=127.0.0.1 port=$(cat "$T_TMP/proxy.port") user=postgres dbname=$(basename "$0" .sh)"
ticks() { q "SELECT count(*) FROM pgoutbox.cron_history WHERE outcome = 'fired'"; }
export PGOUTBOX_DATABASE_STATEMENT_TIMEOUT=1s PGOUTBOX_DATABASE_CONNECT_TIMEOUT=2s
"$PGO_BIN" cron run --db "$PROXY_URL" 2>"$T_TMP/cron.log" &
CR=$!; PIDS+=("$CR")
wait_until 20 '[ "$(ticks)" -ge 3 ]'
kill -STOP "$PROXY"
stalled=$(date +%s%N)
wait_until 20 'grep -q "no reply from PostgreSQL within 11000 ms" "$T_TMP/cron.log"'
noticed=$((($(date +%s%N) - stalled) / 1000000))
[ "$noticed" -le 13000 ] || fail "the stall noticed after $noticed ms (limit 11000 ms)"
wait_until 10 'grep -q "no answer to connecting within 2000 ms" "$T_TMP/cron.log"'
kill -0 "$CR" || fail "cron run died during the stall: $(tail -5 "$T_TMP/cron.log")"
kill -CONT "$PROXY"
before=$(ticks)
wait_until 20 "[ \$(ticks) -ge $((before + 3)) ]"
# SIGTERM while the scheduler waits on the stalled database.
kill -STOP "$PROXY"
sleep 1.5 # its next pass is sent into the stall
start=$(date +%s%N)
kill -TERM "$CR"
wait_until 5 '! kill -0 "$CR" 2>/dev/null'
took=$((($(date +%s%N) - start) / 1000000))
rc=0; wait "$CR" || rc=$?
kill -CONT "$PROXY"
[ "$rc" = 0 ] || fail "cron run exited $rc after SIGTERM during the stall"
[ "$took" -le 2000 ] || fail "SIGTERM during the stall took $took ms"
twice=$(q "SELECT count(*) FROM (SELECT name, tick FROM pgoutbox.cron_history GROUP BY 1, 2 HAVING count(*) > 1) x")
[ "$twice" = 0 ] || fail "$twice ticks recorded twice"
[ "$(q "SELECT count(*) FROM pgoutbox.ex")" = "$(ticks)" ] || fail "$(q "SELECT count(*) FROM pgoutbox.ex") jobs for $(ticks) fired ticks"
note "stall noticed in $noticed ms (limit 11000 ms); ticks resumed after it, none twice; SIGTERM during a stall: exit 0 in $took ms"
