# Nothing in the loop spins: an idle relay, and a relay whose sink takes
# seconds, use (almost) no CPU, in every mode.
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
t_db
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for mode in ordered concurrent strict; do
	start_relay "$T_TMP/idle.$mode" --mode "$mode" --sink stdout --heartbeat 100ms
	sleep 3
	t=$(cpu_ticks "$RELAY_PID")
	stop_relay "$RELAY_PID"
	note "$mode, idle 3 s: $t CPU ticks"
	[ "$t" -lt 50 ] || fail "$mode: an idle relay used $t ticks of CPU in 3 s"
	q "SELECT pgoutbox.send('t', 'k', 'x', '{}')" >/dev/null
	start_relay "$T_TMP/slow.$mode" --mode "$mode" --in-flight 1 --sink exec \
		--exec "touch $T_TMP/started.$mode; sleep 3; cat >/dev/null" --heartbeat 100ms
	wait_until 10 "[ -f $T_TMP/started.$mode ]"
	t0=$(cpu_ticks "$RELAY_PID")
	sleep 2.5
	t=$(( $(cpu_ticks "$RELAY_PID") - t0 ))
	stop_relay "$RELAY_PID"
	note "$mode, 2.5 s inside a slow publish: $t CPU ticks"
	[ "$t" -lt 40 ] || fail "$mode: a relay waiting on its sink used $t ticks of CPU in 2.5 s"
done
# Nor does a relay without a claim floor (--claim-floor off; an adopted
# table has none either): it has nothing to sweep below, so it does not
# claim over and over for a sweep that never starts.
commits() { q "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"; }
x0=$(commits)
start_relay "$T_TMP/nofloor" --sink stdout --claim-floor off --heartbeat 100ms
sleep 3
t=$(cpu_ticks "$RELAY_PID")
stop_relay "$RELAY_PID"
sleep 0.5
x=$(( $(commits) - x0 ))
note "no claim floor, idle 3 s: $t CPU ticks, $x transactions"
[ "$t" -lt 50 ] || fail "no claim floor: an idle relay used $t ticks of CPU in 3 s"
[ "$x" -lt 300 ] || fail "no claim floor: an idle relay ran $x transactions in 3 s"
