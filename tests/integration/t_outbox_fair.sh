# serial
# Fair claims of an outbox across keys (issue 39).  Key a has 100,000
# pending events; a concurrent relay (batch 1000, 2 slots) drains them,
# and 10 events of key b are sent while it does.  With
# `pgoutbox queue set outbox --fair` all of b's events are delivered
# within two claim rounds after their commit: at most 4,000 events of a
# (the 2 batches in flight at the commit and the 2 claimed next) are
# delivered between the commit and b's last event.  Without it, b waits
# behind the rest of a's backlog.  Every event is delivered once in both
# runs; the log notes the drain rates of the fair and the plain claim on
# the same backlog (an ASan build: compare them, not their size).
. "$(dirname "$0")/../lib.sh"
t_db
BATCH=1000 SLOTS=2 BACKLOG=100000

backlog() {
	q "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
	   SELECT 'fair', 'a', 'a.item', jsonb_build_object('i', i) FROM generate_series(1, $BACKLOG) i" >/dev/null
}
now() { date +%s.%N; }
ms() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%d", (e - s) * 1000 }'; }
lines() { wc -l <"$1"; }

# One run: the backlog, a relay, b's 10 events once 5,000 are delivered.
# Sets A_BEFORE (a's events delivered between b's commit and b's last
# event), B_MS (from the commit to b's last event) and RATE (events per
# second, from the relay's start until the outbox is empty).
run() {
	local out=$1 t0 tb n0 nb pid
	backlog
	t0=$(now)
	start_relay "$out" --mode concurrent --batch $BATCH --in-flight $SLOTS --poll-interval 200ms
	pid=$RELAY_PID
	wait_until 60 "[ \$(lines $out) -ge 5000 ]"
	q "SELECT pgoutbox.send('fair', 'b', 'b.item', jsonb_build_object('i', i)) FROM generate_series(1, 10) i" >/dev/null
	tb=$(now)
	n0=$(lines "$out")
	[ "$n0" -lt $((BACKLOG - 10000)) ] || fail "the relay drained the backlog before b's events were sent: $n0 delivered"
	wait_until 120 "[ \$(grep -c '\"key\":\"b\"' $out) = 10 ]"
	B_MS=$(ms "$tb" "$(now)")
	wait_until 120 '[ "$(pending)" = 0 ]'
	RATE=$(awk -v s="$t0" -v e="$(now)" -v n=$((BACKLOG + 10)) 'BEGIN { printf "%d", n / (e - s) }')
	stop_relay "$pid"
	nb=$(grep -n '"key":"b"' "$out" | tail -n 1 | cut -d: -f1)
	# The lines after the commit's count up to b's last, less b's own.
	A_BEFORE=$(sed -n "$((n0 + 1)),${nb}p" "$out" | grep -c '"key":"a"' || true)
	[ "$(ids_of "$out" | sort -u | wc -l)" = $((BACKLOG + 10)) ] ||
		fail "$out: $(ids_of "$out" | sort -u | wc -l) distinct events of $((BACKLOG + 10))"
	[ "$(lines "$out")" = $((BACKLOG + 10)) ] || fail "$out: $(lines "$out") lines for $((BACKLOG + 10)) events"
}

# Fair: set before the relay starts (a relay reads it at its start).
"$PGO_BIN" queue set outbox --fair | qgrep ', fair$' || fail "queue set outbox --fair"
[ "$(q "SELECT to_regclass('pgoutbox.outbox_fair') IS NOT NULL")" = t ] || fail "no index outbox_fair"
run "$T_TMP/fair.out"
grep -q 'claims are fair across keys' "$T_TMP/fair.out.log" || fail "the relay does not say it claims fairly"
fair_a=$A_BEFORE fair_ms=$B_MS fair_rate=$RATE
note "fair: b's 10 events delivered ${fair_ms} ms after their commit, $fair_a events of a delivered in between; drain $fair_rate events/s"

# Plain, on the same backlog.
"$PGO_BIN" queue set outbox --no-fair | qgrep ', fair$' && fail "queue set outbox --no-fair: still fair"
[ "$(q "SELECT count(*) FROM pgoutbox.queue_controls")" = 0 ] || fail "--no-fair left a controls row"
[ "$(q "SELECT to_regclass('pgoutbox.outbox_fair') IS NULL")" = t ] || fail "--no-fair left the index outbox_fair"
run "$T_TMP/plain.out"
note "plain: b's 10 events delivered ${B_MS} ms after their commit, $A_BEFORE events of a delivered in between; drain $RATE events/s"

[ "$fair_a" -le $((2 * SLOTS * BATCH)) ] ||
	fail "fair: $fair_a events of a were delivered between b's commit and b's last event (two claim rounds: $((2 * SLOTS * BATCH)))"
# The plain claim is the control: b waits behind a's backlog there.
[ "$A_BEFORE" -gt $((2 * SLOTS * BATCH)) ] || fail "plain: b was not held back ($A_BEFORE events of a first): the test proves nothing"

# The fair claim's plan (auto_explain, as t_claim_plans reads it): a
# key's rows come from outbox_fair, never from the primary key walked from
# the floor (the generic plan did that, reading all of a's rows to find
# b's: 40-60 ms a claim).
"$PGO_BIN" queue set outbox --fair >/dev/null || fail "queue set outbox --fair"
db=$(basename "$0" .sh)
q "ALTER DATABASE $db SET session_preload_libraries = 'auto_explain'"
q "ALTER DATABASE $db SET auto_explain.log_min_duration = 0"
from=$(stat -c %s "$PG_DIR/server.log")
BACKLOG=20000
backlog
q "SELECT pgoutbox.send('fair', 'b', 'b.item', '{}') FROM generate_series(1, 10)" >/dev/null
# Statistics that see one key in nearly every row: the plan that walked
# the primary key was made with them.
q "ANALYZE pgoutbox.outbox"
start_relay "$T_TMP/plan.out" --mode concurrent --batch $BATCH --poll-interval 200ms
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
q "ALTER DATABASE $db RESET ALL"
tail -c +$((from + 1)) "$PG_DIR/server.log" >"$T_TMP/plans.log"
grep -q 'Index Scan using outbox_fair on outbox c ' "$T_TMP/plans.log" || fail "no fair claim read a key's rows from outbox_fair"
! grep -q 'Index Scan using outbox_pkey on outbox c ' "$T_TMP/plans.log" ||
	fail "a fair claim read a key's rows from the primary key: $(grep -m1 -A3 'outbox_pkey on outbox c ' "$T_TMP/plans.log")"

# Fair on a work queue keeps its controls row (claims through claim_ids);
# an outbox's limits are still refused, naming what it takes.
"$PGO_BIN" queue create jobs >/dev/null || fail "queue create jobs"
"$PGO_BIN" queue set jobs --fair >/dev/null || fail "queue set jobs --fair"
[ "$(q "SELECT fair FROM pgoutbox.queue_controls WHERE queue = 'jobs'")" = t ] || fail "jobs: not fair"
rc=0; "$PGO_BIN" queue set outbox --fair --max-running 3 2>"$T_TMP/err" >/dev/null || rc=$?
[ "$rc" = 1 ] && grep -q 'limits apply to work queues only (an outbox can be paused, or made fair' "$T_TMP/err" ||
	fail "queue set outbox --max-running: exit $rc: $(cat "$T_TMP/err")"
# An outbox captured through the WAL is streamed, not claimed: refused
# (the capture recorded by hand: this cluster's wal_level is replica).
"$PGO_BIN" queue create --kind outbox walq >/dev/null || fail "queue create walq"
q "UPDATE pgoutbox.queues SET capture = 'wal' WHERE name = 'walq'" >/dev/null
rc=0; "$PGO_BIN" queue set walq --fair 2>"$T_TMP/err" >/dev/null || rc=$?
[ "$rc" = 1 ] && grep -q 'captured through the WAL: its relay streams a replication slot, with no claims to make fair' "$T_TMP/err" ||
	fail "queue set --fair on a WAL outbox: exit $rc: $(cat "$T_TMP/err")"
