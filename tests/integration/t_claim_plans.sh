# The relay's claims keep one plan whatever the database's settings and
# statistics say (issue 21): no JIT (an ANALYZE that counted millions of
# dead rows priced the claim above jit_above_cost, and each claim compiled
# for a second), the generic plan of the prepared claim (a custom plan is
# made again at each claim, estimating the floor against an index end
# buried under dead entries), and the sweep below the floor reads heap
# pages (a TID range scan), never the primary key below the floor.
#
# The database here asks for the opposite of each (JIT for any cost,
# custom plans); auto_explain logs every plan of its sessions.
. "$(dirname "$0")/../lib.sh"
t_db
db=$(basename "$0" .sh)
LOG=$PG_DIR/server.log
[ "$(q "SELECT pg_jit_available()")" = t ] ||
	fail "PostgreSQL's JIT (llvmjit) is not available: this test needs it to show the relay turns it off"
q "ALTER DATABASE $db SET session_preload_libraries = 'auto_explain'"
q "ALTER DATABASE $db SET auto_explain.log_min_duration = 0"
q "ALTER DATABASE $db SET jit_above_cost = 0"
q "ALTER DATABASE $db SET plan_cache_mode = force_custom_plan"

for mode in ordered concurrent strict; do
	from=$(stat -c %s "$LOG")
	start_relay "$T_TMP/out.$mode" --sink stdout --mode "$mode" --batch 10 --poll-interval 1s
	q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) SELECT 't', 'k' || (i % 5), 'x', '{}' FROM generate_series(1, 100) i"
	wait_until 30 '[ "$(pending)" = 0 ]'
	pids=$(q "SELECT string_agg(pid::text, '|') FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'pgoutbox relay%'")
	[ -n "$pids" ] || fail "$mode: no relay session found"
	stop_relay "$RELAY_PID"
	# Each plan of a claim: from its "duration" line to the next log line.
	tail -c +"$((from + 1))" "$LOG" | awk -v pids="^($pids)\$" '
		match($0, /\[[0-9]+\] LOG:  duration: /) {
			split(substr($0, RSTART, RLENGTH), f, /[][ ]+/)
			keep = f[2] ~ pids; n++
		}
		!/LOG:  duration: / && / LOG: / { keep = 0 }
		keep { print n ": " $0 }' >"$T_TMP/plans.$mode"
	awk -F': ' '/DELETE FROM pgoutbox."outbox"/ { print $1 }' "$T_TMP/plans.$mode" | sort -u >"$T_TMP/claims.$mode"
	claims=$(wc -l <"$T_TMP/claims.$mode")
	[ "$claims" -gt 0 ] || fail "$mode: no claim plan logged"
	for n in $(cat "$T_TMP/claims.$mode"); do
		grep "^$n: " "$T_TMP/plans.$mode" >"$T_TMP/plan"
		grep -q "JIT:" "$T_TMP/plan" && { cat "$T_TMP/plan" >&2; fail "$mode: a claim was compiled by JIT"; }
		grep -Eq "Index Cond: \(id >= \\\$[0-9]+\)" "$T_TMP/plan" ||
			{ cat "$T_TMP/plan" >&2; fail "$mode: a claim ran a custom plan (the floor as a constant)"; }
		grep -q "Tid Range Scan" "$T_TMP/plan" ||
			{ cat "$T_TMP/plan" >&2; fail "$mode: the sweep's part of a claim is not a TID range scan"; }
	done
	note "$mode: $claims claims, generic plans without JIT, the sweep by heap pages"
	q "TRUNCATE pgoutbox.outbox"
done
