# systemd's notify protocol (Type=notify): a listener on NOTIFY_SOCKET sees
# READY=1 once the relay is connected, WATCHDOG=1 from its loop every half
# WATCHDOG_USEC, and STOPPING=1 at SIGTERM, in that order.  `pgoutbox run`
# notifies from one child only.  systemd-analyze verify checks the unit.
. "$(dirname "$0")/../lib.sh"
t_db
LISTEN="$(dirname "$0")/../notify_listen.py"
start_listener() {
	: >"$2"
	python3 "$LISTEN" "$1" "$2" &
	PIDS+=("$!")
	wait_until 10 "grep -q LISTENING '$2'"
}
# The line numbers of the first READY=1, WATCHDOG=1 and STOPPING=1.
line_of() { grep -n -m1 -x "$1" "$2" | cut -d: -f1; }

start_listener "$T_TMP/notify.sock" "$T_TMP/notify.txt"
NOTIFY_SOCKET="$T_TMP/notify.sock" WATCHDOG_USEC=400000 start_relay "$T_TMP/relay" --sink stdout
wait_until 30 "grep -qx READY=1 '$T_TMP/notify.txt'"
grep -q '^STATUS=relay outbox -> stdout' "$T_TMP/notify.txt" || fail "no STATUS with READY=1: $(cat "$T_TMP/notify.txt")"
# Fed every 200 ms: three within a few seconds.
wait_until 10 "[ \$(grep -cx WATCHDOG=1 '$T_TMP/notify.txt') -ge 3 ]"
grep -q 'systemd watchdog: fed every 200 ms' "$T_TMP/relay.log" || fail "no watchdog line in the relay log"
stop_relay "$RELAY_PID"
wait_until 10 "grep -qx STOPPING=1 '$T_TMP/notify.txt'"
r=$(line_of READY=1 "$T_TMP/notify.txt"); w=$(line_of WATCHDOG=1 "$T_TMP/notify.txt"); s=$(line_of STOPPING=1 "$T_TMP/notify.txt")
[ "$r" -lt "$w" ] && [ "$w" -lt "$s" ] || fail "order: READY=1 at line $r, WATCHDOG=1 at $w, STOPPING=1 at $s"
note "relay: READY=1, $(grep -cx WATCHDOG=1 "$T_TMP/notify.txt") x WATCHDOG=1, STOPPING=1 in order"

# Not connected yet: no READY=1 while PostgreSQL is unreachable.
start_listener "$T_TMP/notify2.sock" "$T_TMP/notify2.txt"
NOTIFY_SOCKET="$T_TMP/notify2.sock" DATABASE_URL="host=127.0.0.1 port=1 connect_timeout=1" \
	start_relay "$T_TMP/relay2" --sink stdout
wait_until 20 "grep -q 'Connection refused\|could not connect' '$T_TMP/relay2.log'"
sleep 0.5
grep -qx READY=1 "$T_TMP/notify2.txt" && fail "READY=1 without a database connection"
stop_relay "$RELAY_PID"
note "no READY=1 while PostgreSQL is unreachable"

# pgoutbox run: one child (the relay) notifies; the watchdog pid is its own.
start_listener "$T_TMP/notify3.sock" "$T_TMP/notify3.txt"
q "SELECT pgoutbox.create_queue('jobs')" >/dev/null
cat >"$T_TMP/run.ini" <<INI
[worker]
queue = jobs
exec_command = cat >/dev/null
[relay]
sink = stdout
stats_interval = 0
INI
NOTIFY_SOCKET="$T_TMP/notify3.sock" WATCHDOG_USEC=400000 WATCHDOG_PID=$$ \
	"$PGO_BIN" run --config "$T_TMP/run.ini" >"$T_TMP/run.out" 2>"$T_TMP/run.log" &
run_pid=$!
PIDS+=("$run_pid")
wait_until 30 "grep -qx READY=1 '$T_TMP/notify3.txt'"
wait_until 10 "[ \$(grep -cx WATCHDOG=1 '$T_TMP/notify3.txt') -ge 2 ]"
kill -TERM "$run_pid"
wait "$run_pid" || fail "run exited $? after SIGTERM"
wait_until 10 "grep -qx STOPPING=1 '$T_TMP/notify3.txt'"
[ "$(grep -cx READY=1 "$T_TMP/notify3.txt")" = 1 ] || fail "run: READY=1 sent $(grep -cx READY=1 "$T_TMP/notify3.txt") times, expected once (one child)"
grep -q '^STATUS=relay' "$T_TMP/notify3.txt" || fail "run: the relay child did not notify"
note "run: one READY=1 (the relay), WATCHDOG=1 from its loop, STOPPING=1"

# The unit files pass systemd-analyze verify (where systemd is installed).
if command -v systemd-analyze >/dev/null; then
	units="$(dirname "$0")/../../contrib/systemd"
	mkdir -p "$T_TMP/units"
	# The unit's source, as meson writes it (t_install.sh verifies the
	# installed one): verify wants the binary where ExecStart says.
	sed -e "s|@BINDIR@|$(dirname "$PGO_BIN")|g" -e "s|@DOCDIR@|/usr/share/doc/pgoutbox|g" \
		"$units/pgoutbox@.service.in" >"$T_TMP/units/pgoutbox@demo.service"
	systemd-analyze verify --man=no "$T_TMP/units/pgoutbox@demo.service" >"$T_TMP/verify.txt" 2>&1 ||
		fail "systemd-analyze verify: $(cat "$T_TMP/verify.txt")"
	grep -v -e '^$' "$T_TMP/verify.txt" | qgrep . && note "systemd-analyze verify says: $(cat "$T_TMP/verify.txt")"
	note "systemd-analyze verify: pgoutbox@.service clean"
else
	note "systemd-analyze not installed: unit files not verified"
fi
