# A DBA sets statement_timeout and idle_in_transaction_session_timeout
# low (ALTER DATABASE ... SET and ALTER ROLE ... SET, issue 38): the
# sessions pgoutbox opens after it (all of them, once ended) keep their
# own settings where they have some and work within the DBA's where not.
# Under load for 20 s: nothing lost, the sql jobs once, no cron tick
# fired twice, every process alive, /readyz 200.
# Seen failing with pgoutbox keeping none of its own timeouts (the
# relay's settings_sql, its wake session's SET statement_timeout = 0,
# the workers' SET statement_timeout): the relays' heartbeats and lease
# rounds canceled by the DBA's 20 ms, 134-137 log lines each.
. "$(dirname "$0")/../lib.sh"
PG_PORT= pg_start "$T_TMP/pg" fsync=off
trap 'cleanup_pids; pg_stop' EXIT
t_db
. "$(dirname "$0")/../fleet.sh"
fleet_schema
fleet_start "$DATABASE_URL" 3
code_of() { curl -s -o /dev/null -w '%{http_code}' "$1"; }
R=http://127.0.0.1:$MPORT/readyz
wait_until 30 '[ "$(code_of $R)" = 200 ]'
# The test's own sessions (checks, producer) keep the server's defaults:
# pgoutbox's processes started before this and do not see it.
export PGOPTIONS='-c statement_timeout=0 -c idle_in_transaction_session_timeout=0'
q "ALTER DATABASE t_storm_timeouts SET statement_timeout = '20ms'"
q "ALTER ROLE postgres IN DATABASE t_storm_timeouts SET idle_in_transaction_session_timeout = '50ms'"
# Every pgoutbox session starts again under them.
q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE 'pgoutbox %'" >/dev/null
fleet_produce "$DATABASE_URL" 20
# A DBA's view: the timeouts the pgoutbox sessions run with now.
sleep 3
q "SELECT DISTINCT application_name FROM pg_stat_activity WHERE application_name LIKE 'pgoutbox %' ORDER BY 1" >"$T_TMP/apps"
note "sessions under the DBA's timeouts: $(paste -sd, "$T_TMP/apps")"
for p in "${PRODUCERS[@]}"; do wait "$p"; done
fleet_alive
fleet_drain "$DATABASE_URL"
wait_until 30 '[ "$(code_of $R)" = 200 ]'
fleet_stop
q "ALTER DATABASE t_storm_timeouts RESET statement_timeout"
q "ALTER ROLE postgres IN DATABASE t_storm_timeouts RESET idle_in_transaction_session_timeout"
fleet_check "$DATABASE_URL"
n=$(cat "$T_TMP"/relay*.log "$T_TMP"/ex.log "$T_TMP"/sq.log "$T_TMP"/cron.log | grep -c 'statement timeout\|idle-in-transaction timeout' || true)
note "$n log lines name a timeout"
lines=$(fleet_loglines)
note "log lines: $(echo $lines)"
while read -r f n; do
	[ "$f" = cron.log ] && continue # a line per fired tick
	[ "$n" -lt 100 ] || { tail -n 20 "$T_TMP/$f" >&2; fail "$f: $n log lines"; }
done <<<"$lines"
