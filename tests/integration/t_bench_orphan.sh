# pgoutbox-bench killed outright stops the relay it started: the relay
# child asks for SIGTERM when its parent dies (PR_SET_PDEATHSIG), so a
# bench stopped with kill -9 (or a timeout's SIGKILL) leaves no relay
# behind, polling a server its run's cleanup stops.  Once both of the
# relay's claim sessions are up, the bench is killed with SIGKILL; the
# relay must end, and its sessions leave the server, within 15 s.
. "$(dirname "$0")/../lib.sh"
t_db
BENCH=$(dirname "$PGO_BIN")/bench/pgoutbox-bench
[ -x "$BENCH" ] || fail "$BENCH not built"
relay_sessions() { q "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'pgoutbox relay %'"; }
"$BENCH" latency --db "$DATABASE_URL" --rate 200 --seconds 120 \
	--relay-cmd "$PGO_BIN relay --sink stdout" >"$T_TMP/bench.log" 2>&1 &
bench=$!
PIDS+=("$bench")
wait_until 20 "[ \$(relay_sessions) -ge 2 ]"
relay=$(pgrep -P "$bench") || fail "no child of the bench: $(cat "$T_TMP/bench.log")"
PIDS+=("$relay")
grep -q relay "/proc/$relay/cmdline" || fail "child $relay is not the relay: $(tr '\0' ' ' <"/proc/$relay/cmdline")"
kill -9 "$bench"
# Gone, or a zombie waiting for whoever adopted it to reap it.
ended() { [ ! -e "/proc/$relay" ] || [ "$(awk '{ print $3 }' "/proc/$relay/stat" 2>/dev/null)" = Z ]; }
wait_until 15 "ended"
wait_until 15 "[ \$(relay_sessions) = 0 ]"
note "relay $relay ended after the bench's SIGKILL"
