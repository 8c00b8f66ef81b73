# serial
# Pause and resume of an outbox's relaying (issue 39).  Two ordered
# relays drain a backlog while a producer keeps sending; `pgoutbox queue
# pause outbox` stops their claims without a restart: nothing is claimed
# (deleted from the outbox) or delivered more than 1 s after the pause
# returns, the producer's events are still accepted, and after `queue
# resume` the relays (polling only every 30 s) start again within 1 s,
# woken by resume's notification; every event is delivered once.  A
# concurrent relay started on a paused outbox queue claims nothing until
# resumed.  `pgoutbox status` says paused.  set_queue's limits are
# refused for an outbox, and the pause of a WAL-captured one.
. "$(dirname "$0")/../lib.sh"
t_db
make_aggregates
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
   SELECT 'bulk', 'b' || (i % 500), 'bulk.item', jsonb_build_object('i', i) FROM generate_series(1, 300000) i" >/dev/null
start_relay "$T_TMP/r1.out" --poll-interval 30s --batch 500
R1=$RELAY_PID
start_relay "$T_TMP/r2.out" --poll-interval 30s --batch 500
R2=$RELAY_PID
delivered() { cat "$T_TMP/r1.out" "$T_TMP/r2.out" | wc -l; }
wait_until 60 '[ "$(delivered)" -ge 20000 ]'
start_producer 6 0.001
sleep 0.5
"$PGO_BIN" queue pause outbox >"$T_TMP/pause.out" || fail "queue pause outbox: $(cat "$T_TMP/pause.out")"
paused_at=$(date +%s.%N)
grep -qx 'queue outbox paused' "$T_TMP/pause.out" || fail "pause said: $(cat "$T_TMP/pause.out")"
# The rows the claims have not taken yet, among those that existed at the
# pause: the claims delete them, so the count stops moving with them.
max_id=$(q "SELECT max(id) FROM pgoutbox.outbox")
# Sample what arrived every 20 ms for 3 s: the last change is the pause's
# latency as a sink sees it.
last_change=$paused_at left_1s=
prev=$(delivered)
while awk -v s="$paused_at" -v n="$(date +%s.%N)" 'BEGIN { exit !(n < s + 3) }'; do
	now=$(date +%s.%N); cur=$(delivered)
	[ "$cur" != "$prev" ] && last_change=$now && prev=$cur
	[ -z "$left_1s" ] && awk -v s="$paused_at" -v n="$now" 'BEGIN { exit !(n >= s + 1) }' &&
		left_1s=$(q "SELECT count(*) FROM pgoutbox.outbox WHERE id <= $max_id")
	sleep 0.02
done
latency_ms=$(awk -v s="$paused_at" -v l="$last_change" 'BEGIN { printf "%d", (l - s) * 1000 }')
left_3s=$(q "SELECT count(*) FROM pgoutbox.outbox WHERE id <= $max_id")
note "pause: last delivery ${latency_ms} ms after the pause returned; $prev delivered, $left_3s of the backlog left"
[ "$latency_ms" -lt 1000 ] || fail "events were delivered ${latency_ms} ms after the pause"
[ "$left_1s" = "$left_3s" ] || fail "claims went on while paused: $left_1s rows left 1 s after the pause, $left_3s at 3 s"
[ "$left_3s" -gt 0 ] || fail "the backlog drained before the pause took effect"
[ "$(q "SELECT max(id) FROM pgoutbox.outbox")" -gt "$max_id" ] || fail "the producer's events were not accepted while paused"
"$PGO_BIN" status | qgrep 'PAUSED: its relays claim nothing' || fail "status does not say paused: $("$PGO_BIN" status)"
"$PGO_BIN" status --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["paused"] is True else 1)' ||
	fail "status --json: not paused"
kill -0 "$R1" && kill -0 "$R2" || fail "a relay exited while paused"
# Resume: only the notification can wake relays polling every 30 s.
before=$(delivered)
"$PGO_BIN" queue resume outbox | qgrep -x 'queue outbox resumed' || fail "queue resume outbox"
resumed_at=$(date +%s.%N)
wait_until 10 "[ \"\$(delivered)\" -gt $before ]"
woke_ms=$(awk -v s="$resumed_at" -v n="$(date +%s.%N)" 'BEGIN { printf "%d", (n - s) * 1000 }')
note "resume: deliveries again ${woke_ms} ms after the resume returned"
[ "$woke_ms" -lt 1000 ] || fail "the relays took ${woke_ms} ms to start again"
for p in "${PRODUCERS[@]}"; do wait "$p" || fail "the producer failed"; done
wait_until 120 '[ "$(pending)" = 0 ]'
stop_relay "$R1"
stop_relay "$R2"
want=$(q "SELECT 300000 + sum(version) FROM agg")
[ "$(ids_of "$T_TMP/r1.out" "$T_TMP/r2.out" | sort -u | wc -l)" = "$want" ] || fail "distinct events delivered: $(ids_of "$T_TMP/r1.out" "$T_TMP/r2.out" | sort -u | wc -l), want $want"
[ "$(delivered)" = "$want" ] || fail "delivered $(delivered) lines for $want events"
[ "$(q "SELECT count(*) FROM pgoutbox.queue_controls")" = 0 ] || fail "resume left a controls row"
[ "$("$PGO_BIN" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["paused"])')" = False ] ||
	fail "status --json: paused after the resume"

# An outbox queue of its own, concurrent mode, paused before its relay starts.
"$PGO_BIN" queue create --kind outbox billing >/dev/null || fail "queue create billing"
"$PGO_BIN" queue pause billing | qgrep -x 'queue billing paused' || fail "queue pause billing"
q "SELECT pgoutbox.send_to('billing', 'inv', 'k' || (i % 7), 'x', jsonb_build_object('i', i)) FROM generate_series(1, 1000) i" >/dev/null
start_relay "$T_TMP/b.out" --queue billing --mode concurrent --poll-interval 200ms
B=$RELAY_PID
sleep 1.5
[ "$(wc -l <"$T_TMP/b.out")" = 0 ] || fail "a relay delivered $(wc -l <"$T_TMP/b.out") events of a paused queue"
[ "$(q "SELECT count(*) FROM pgoutbox.billing")" = 1000 ] || fail "a relay claimed events of a paused queue"
"$PGO_BIN" queue resume billing >/dev/null || fail "queue resume billing"
wait_until 20 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.billing')\" = 0 ]"
stop_relay "$B"
[ "$(ids_of "$T_TMP/b.out" | sort -u | wc -l)" = 1000 ] || fail "billing: $(ids_of "$T_TMP/b.out" | sort -u | wc -l) of 1000 delivered"

rc=0; "$PGO_BIN" queue set billing --max-running 3 2>"$T_TMP/err" || rc=$?
[ "$rc" = 1 ] && grep -q 'limits apply to work queues only' "$T_TMP/err" || fail "queue set on an outbox: exit $rc: $(cat "$T_TMP/err")"
# An outbox captured through the WAL is streamed, not claimed: refused
# (the capture recorded by hand: this cluster's wal_level is replica).
q "UPDATE pgoutbox.queues SET capture = 'wal' WHERE name = 'billing'" >/dev/null
rc=0; "$PGO_BIN" queue pause billing 2>"$T_TMP/err" || rc=$?
[ "$rc" = 1 ] && grep -q 'captured through the WAL: its relay streams a replication slot and cannot be paused' "$T_TMP/err" ||
	fail "pause of a WAL queue: exit $rc: $(cat "$T_TMP/err")"
