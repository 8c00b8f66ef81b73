# Failover driven by pg_auto_failover (issue 38): a monitor and two
# nodes made with pg_autoctl (all local: own ports, own directories),
# synchronous replication as pg_auto_failover sets it up.  Three ordered
# relays, an exec worker, an sql worker and cron run on the formation's
# URI (`pg_autoctl show uri --formation default`: both nodes and
# target_session_attrs=read-write) while a producer writes.  The
# primary's host crashes: its pg_autoctl and its PostgreSQL killed -9
# together (a PostgreSQL killed alone is restarted by its keeper, no
# failover).  pg_auto_failover promotes the secondary; then every
# acknowledged event is delivered in per-key order and every job done
# (the sql ones once), no cron tick fired twice, and the times are
# reported: from the crash to the new primary taking writes
# (pg_auto_failover's part) and from then to the first delivery
# (pgoutbox's part: at most relay.reconnect_max, 10 s, plus a margin).
# The monitor's timeouts are lowered (unhealthy after 5 s, demotion
# waited 5 s) to keep the test short; T_AUTOCTL_DEFAULTS=1 keeps
# pg_auto_failover's defaults (20 s and 30 s).  T_FAILOVER_OLD_ONLY=1
# gives pgoutbox the old primary's address alone: the test must fail.
# serial: pg_auto_failover's health checks and the times measured
. "$(dirname "$0")/../lib.sh"
command -v pg_autoctl >/dev/null ||
	fail "pg_autoctl not found: apt-get install postgresql-15-auto-failover (scripts/deps.sh does)"
AF=$T_TMP/af
mkdir -p "$AF"
[ "$(id -u)" = 0 ] && chown postgres: "$AF"
PG_BIN=$(pg_bindir)
# pg_autoctl keeps its configuration, state and pid files under the XDG
# directories: the test's own.
autoctl() {
	pg_as env XDG_CONFIG_HOME="$AF/config" XDG_DATA_HOME="$AF/share" \
		XDG_RUNTIME_DIR="$AF/run" pg_autoctl "$@"
}
declare -A AF_PID
af_run() {
	autoctl run --pgdata "$AF/$1" >"$T_TMP/$1.log" 2>&1 &
	AF_PID[$1]=$!
}
# kill -9 of a pg_autoctl and everything under it (its PostgreSQL too).
descendants() {
	local p
	for p in $(pgrep -P "$1"); do
		echo "$p"
		descendants "$p"
	done
}
af_kill9() {
	local pids p
	pids="${AF_PID[$1]} $(descendants "${AF_PID[$1]}")"
	# shellcheck disable=SC2086
	kill -9 $pids 2>/dev/null || true
	for p in $pids; do
		while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
	done
	# Its postmaster's pid may be reused: nothing must signal it.
	rm -f "$AF/$1/postmaster.pid"
	unset "AF_PID[$1]"
}
af_cleanup() {
	local n
	for n in "${!AF_PID[@]}"; do af_kill9 "$n"; done
}
trap 'cleanup_pids; af_cleanup' EXIT
MON_PORT=$(pg_free_port)
P1=$(pg_free_port)
P2=$(pg_free_port)
DB=$(basename "$0" .sh)
common=(--pgctl "$PG_BIN/pg_ctl" --hostname 127.0.0.1 --auth trust --no-ssl)
autoctl create monitor "${common[@]}" --pgdata "$AF/mon" --pgport "$MON_PORT" \
	>"$AF/create.log" 2>&1 || { tail -n 20 "$AF/create.log" >&2; fail "pg_autoctl create monitor"; }
af_run mon
MON_SQL="host=127.0.0.1 port=$MON_PORT user=postgres dbname=pg_auto_failover"
wait_until 30 'psql -XAtq "$MON_SQL" -c "SELECT 1" >/dev/null 2>&1'
if [ -z "${T_AUTOCTL_DEFAULTS:-}" ]; then
	psql -XAtq "$MON_SQL" -c "ALTER SYSTEM SET pgautofailover.health_check_period = 1000" \
		-c "ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500" \
		-c "ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 5000" \
		-c "ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 5000" \
		-c "SELECT pg_reload_conf()" >/dev/null
fi
MON="postgres://autoctl_node@127.0.0.1:$MON_PORT/pg_auto_failover?sslmode=disable"
states() { psql -XAtq "$MON_SQL" -c "SELECT string_agg(nodename || ':' || reportedstate, ' ' ORDER BY nodeid) FROM pgautofailover.node"; }
for n in n1 n2; do
	port=$P1
	[ $n = n2 ] && port=$P2
	autoctl create postgres "${common[@]}" --pgdata "$AF/$n" --pgport "$port" \
		--dbname "$DB" --monitor "$MON" --name $n >>"$AF/create.log" 2>&1 ||
		{ tail -n 20 "$AF/create.log" >&2; fail "pg_autoctl create postgres $n"; }
	af_run $n
	[ $n = n1 ] && wait_until 60 '[ "$(states)" = "n1:single" ]'
done
wait_until 60 '[ "$(states)" = "n1:primary n2:secondary" ]'
note "sync: $(psql -XAtq "host=127.0.0.1 port=$P1 user=postgres dbname=$DB" -c "SHOW synchronous_standby_names")"
# The URI pg_auto_failover gives applications, with a user.
URL="$(autoctl show uri --pgdata "$AF/mon" --formation default)&user=postgres"
case $URL in *"127.0.0.1:$P1,127.0.0.1:$P2/$DB?"*target_session_attrs=read-write*) ;;
*) fail "formation URI: $URL" ;; esac
export DATABASE_URL=$URL
"$PGO_BIN" migrate >/dev/null 2>"$T_TMP/migrate.log" || { cat "$T_TMP/migrate.log" >&2; fail "migrate"; }
PURL=$URL
[ -z "${T_FAILOVER_OLD_ONLY:-}" ] || PURL="host=127.0.0.1 port=$P1 user=postgres dbname=$DB"
. "$(dirname "$0")/../fleet.sh"
fleet_schema
fleet_start "$PURL" 3
code_of() { curl -s -o /dev/null -w '%{http_code}' "$1"; }
wait_until 30 '[ "$(code_of http://127.0.0.1:$MPORT/readyz)" = 200 ]'
secs=30
[ -z "${T_AUTOCTL_DEFAULTS:-}" ] || secs=75
fleet_produce "$URL" $secs
sleep 5
[ "$(ids_of "$OUT" | wc -l)" -gt 0 ] || fail "nothing delivered before the failover"
t0=$(date +%s%N)
af_kill9 n1
sleep 1
before=$(wc -l <"$OUT")
# pg_auto_failover's part: until a read-write session opens on the URI.
wait_until 120 'psql -XAtq "$URL" -c "SELECT 1" >/dev/null 2>&1'
t1=$(date +%s%N)
# pgoutbox's part: until a relay delivers again.
wait_until 30 '[ "$(wc -l <"$OUT")" -gt "$before" ]'
t2=$(date +%s%N)
[ "$(psql -XAtq "$URL" -c "SHOW port")" = "$P2" ] || fail "the read-write node is not n2"
for p in "${PRODUCERS[@]}"; do wait "$p"; done
fleet_alive
fleet_drain "$URL"
fleet_stop
fleet_check "$URL"
note "states after: $(states)"
ms_af=$(((t1 - t0) / 1000000))
ms_first=$(((t2 - t1) / 1000000))
note "crash to the new primary taking writes ${ms_af} ms (pg_auto_failover); then first delivery ${ms_first} ms; crash to first delivery $(((t2 - t0) / 1000000)) ms"
[ "$ms_first" -le 15000 ] || fail "first delivery ${ms_first} ms after the new primary took writes (relay.reconnect_max 10 s + 5 s)"
