# The console follows a reload (docs/console.md): its databases are the
# file's [database NAME] sections from the SIGHUP on.
#  1. `pgoutbox console` over a, b; the file now names a and c; SIGHUP:
#     the overview shows a and c, a kept its connection (no second
#     connect), b's is closed; a file that does not parse changes
#     nothing.
#  2. A fleet relay's console (console.enabled on metrics.listen) over
#     a, b; c added to the file, SIGHUP: the relay serves c and the
#     console's overview shows a, b and c.
. "$(dirname "$0")/../lib.sh"
for d in a b c; do
	t_db "t_console_reload_$d"
	q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) SELECT 't', 'k', 'x', '{}' FROM generate_series(1, 3)"
done
url() { pg_url "t_console_reload_$1"; }
sections() { for d in "$@"; do printf '[database %s]\nurl = %s\n\n' "$d" "$(url "$d")"; done; }
# The databases an overview names, in order, one line.
names() { python3 -c 'import json,sys; print(" ".join(d["name"] for d in json.load(sys.stdin)["databases"]))'; }
overview() { curl -sf "http://127.0.0.1:$1/api/overview" | names; }
# Sessions of the console on database $1.
conns() { psql -XAtq "$(pg_url postgres)" -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgoutbox console' AND datname = 't_console_reload_$1'"; }

# 1. pgoutbox console.
CONF=$T_TMP/console.ini
sections a b >"$CONF"
CPORT=$(pg_free_port)
"$PGO_BIN" console --config "$CONF" --listen "127.0.0.1:$CPORT" >"$T_TMP/console.log" 2>&1 &
CONSOLE=$!
PIDS+=("$CONSOLE")
wait_until 30 'curl -sf "http://127.0.0.1:$CPORT/" >/dev/null'
[ "$(overview "$CPORT")" = "a b" ] || fail "overview before the reload: $(overview "$CPORT")"
[ "$(conns a)" = 1 ] && [ "$(conns b)" = 1 ] || fail "console sessions before: a $(conns a), b $(conns b)"
a_pid=$(psql -XAtq "$(pg_url postgres)" -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgoutbox console' AND datname = 't_console_reload_a'")
sections a c >"$CONF"
kill -HUP "$CONSOLE"
wait_until 10 '[ "$(overview "$CPORT")" = "a c" ]'
wait_until 10 '[ "$(conns b)" = 0 ]'
[ "$(psql -XAtq "$(pg_url postgres)" -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgoutbox console' AND datname = 't_console_reload_a'")" = "$a_pid" ] ||
	fail "a's connection was made again: it should be kept"
grep -q 'reloaded: 2 databases (1 kept; added: c; removed: b)' "$T_TMP/console.log" ||
	fail "no reload line: $(tail -5 "$T_TMP/console.log")"
echo '[database' >"$CONF"
kill -HUP "$CONSOLE"
wait_until 10 'grep -q "reload failed" "$T_TMP/console.log"'
[ "$(overview "$CPORT")" = "a c" ] || fail "a file that does not parse changed the databases: $(overview "$CPORT")"
kill -0 "$CONSOLE" || fail "the console died on a bad file"
kill -TERM "$CONSOLE"
wait "$CONSOLE" || fail "console exited $? after SIGTERM"

# 2. A fleet relay's console.
MPORT=$(pg_free_port)
RCONF=$T_TMP/relay.ini
write_relay() { { printf '[metrics]\nlisten = 127.0.0.1:%s\n[console]\nenabled = true\n\n' "$MPORT"; sections "$@"; } >"$RCONF"; }
write_relay a b
start_relay "$T_TMP/r" --config "$RCONF" --sink stdout
relay=$RELAY_PID
wait_until 30 '[ "$(overview "$MPORT" 2>/dev/null)" = "a b" ]'
wait_until 10 '[ "$(grep -c "\"pgoutbox-source\": \"a\"" "$T_TMP/r")" = 3 ]'
write_relay a b c
kill -HUP "$relay"
wait_until 15 '[ "$(overview "$MPORT")" = "a b c" ]'
wait_until 15 '[ "$(grep -c "\"pgoutbox-source\": \"c\"" "$T_TMP/r")" = 3 ]'
stop_relay "$relay"
note "console: a, b -> a, c by SIGHUP (a's connection kept, b's closed); a fleet relay's console: a, b -> a, b, c"
