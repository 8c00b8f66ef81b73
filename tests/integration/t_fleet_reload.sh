# SIGHUP adds and removes a fleet's databases: a [database NAME] section
# added to the file starts relaying its database (its backlog arrives);
# one removed stops its relay (the process goes on), its series leave
# /metrics, and an event sent there afterwards stays in its queue while
# one sent to a database still served after it arrives.
. "$(dirname "$0")/../lib.sh"
for d in t_fleet_reload_a t_fleet_reload_b t_fleet_reload_c; do
	t_db "$d"
	q "SELECT pgoutbox.send('t', 'k', 'x', '{\"from\": \"$d\"}')" >/dev/null
done
CONF=$T_TMP/fleet.ini
section() { printf '[database %s]\nurl = %s\n\n' "$1" "$(pg_url "t_fleet_reload_$1")"; }
{ section a; section b; } >"$CONF"
MPORT=$(pg_free_port)
start_relay "$T_TMP/out" --config "$CONF" --sink stdout --metrics-listen "127.0.0.1:$MPORT"
relay=$RELAY_PID
from() { grep -c "\"from\": \"t_fleet_reload_$1\"" "$T_TMP/out" || true; }
wait_until 30 '[ "$(from a)" = 1 ] && [ "$(from b)" = 1 ]'
[ "$(from c)" = 0 ] || fail "database c relayed before its section"
{ section a; section b; section c; } >"$CONF"
kill -HUP "$relay"
wait_until 30 '[ "$(from c)" = 1 ]'
grep -q 'database c added' "$T_TMP/out.log" || fail "no 'database c added' line"
# Remove a.
{ section b; section c; } >"$CONF"
kill -HUP "$relay"
wait_until 30 'grep -q "database a stopped" "$T_TMP/out.log"'
curl -sf "http://127.0.0.1:$MPORT/metrics" >"$T_TMP/metrics"
grep -q 'database="a"' "$T_TMP/metrics" && fail "database a's series are still served"
grep -q '^pgoutbox_events_published_total{database="c"' "$T_TMP/metrics" || fail "no series of database c"
DATABASE_URL=$(pg_url t_fleet_reload_a) q "SELECT pgoutbox.send('t', 'k', 'x', '{\"from\": \"t_fleet_reload_a\"}')" >/dev/null
DATABASE_URL=$(pg_url t_fleet_reload_b) q "SELECT pgoutbox.send('t', 'k', 'x', '{\"from\": \"t_fleet_reload_b\"}')" >/dev/null
wait_until 30 '[ "$(from b)" = 2 ]'
[ "$(from a)" = 1 ] || fail "database a relayed after its section was removed"
[ "$(DATABASE_URL=$(pg_url t_fleet_reload_a) pending)" = 1 ] || fail "database a's event left its queue"
kill -0 "$relay" || fail "the relay stopped"
stop_relay "$relay"
note "SIGHUP added database c (its backlog delivered) and removed a (its relay stopped, the others went on)"
