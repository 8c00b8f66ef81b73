# Poison events in ordered mode.  A sink that keeps failing one event:
#  - dead_letter policy: the event is retried with backoff, then
#    dead-lettered; later events of its key wait for it (held back without
#    spending attempts) and follow in order; other keys never wait.
#  - halt policy: the event stays, its shard stops (other keys of that shard
#    wait too), `status` reports it; after the operator's fix the shard
#    resumes in order.
. "$(dirname "$0")/../lib.sh"
t_db
# Keys: K (the poisoned one), S (same shard as K), O (another shard).
K=key-poison
S=$(q "SELECT 'k' || i FROM generate_series(1, 100000) i WHERE pgoutbox.shard_of('k' || i, 0, 64) = pgoutbox.shard_of('$K', 0, 64) LIMIT 1")
O=$(q "SELECT 'k' || i FROM generate_series(1, 100000) i WHERE pgoutbox.shard_of('k' || i, 0, 64) <> pgoutbox.shard_of('$K', 0, 64) LIMIT 1")
[ -n "$S" ] && [ -n "$O" ] || fail "could not pick keys"
send() { q "SELECT pgoutbox.send('t', '$1', 'x', '{\"n\": $2}')" ; }

# An ordered sink, as an exec command: events of a key after a failed one
# are not delivered (answered "retry"), the rest are appended to OUT.
cat >"$T_TMP/sink.sh" <<SH
#!/bin/bash
blocked=" "
while IFS= read -r line; do
	id=\${line#*\"id\":}; id=\${id%%,*}
	key=\${line#*\"key\":\"}; key=\${key%%\"*}
	n=\${line#*\"n\": }; n=\${n%%\}*}
	if [ "\$key" = "$K" ] && [ "\$n" = 1 ] && [ ! -f "$T_TMP/fixed" ]; then
		echo "retry \$id boom"; blocked="\$blocked\$key "
	elif [[ "\$blocked" == *" \$key "* ]]; then
		echo "retry \$id blocked"
	else
		echo "\$line" >> "$T_TMP/out"
	fi
done
SH
chmod +x "$T_TMP/sink.sh"
: >"$T_TMP/out"
P1=$(send "$K" 1); send "$K" 2 >/dev/null; send "$O" 1 >/dev/null; send "$K" 3 >/dev/null; send "$S" 1 >/dev/null
start_relay "$T_TMP/relay" --mode ordered --sink exec --exec "$T_TMP/sink.sh" \
	--max-attempts 3 --in-flight 1 --poll-interval 100ms

wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
row=$(q "SELECT id, attempts, last_error FROM pgoutbox.dead_letters")
[ "$row" = "$P1|3|boom" ] || fail "dead letter: '$row', want '$P1|3|boom'"
order=$(grep -o '"key":"[^"]*".*"n": [0-9]*' "$T_TMP/out" | sed 's/"key":"\([^"]*\)".*"n": \([0-9]*\)/\1:\2/' | tr '\n' ' ')
note "delivery order (dead_letter policy): $order"
case "$order" in
"$O:1 $S:1 $K:2 $K:3 "|"$S:1 $O:1 $K:2 $K:3 ") ;;
*) fail "order: $order (other keys first, then $K:2 $K:3 after the dead letter)" ;;
esac
grep "\"key\":\"$K\"" "$T_TMP/out" | qgrep '"attempts":0' || fail "held-back events spent attempts: $(cat "$T_TMP/out")"

# Halt policy.
q "DELETE FROM pgoutbox.dead_letters"
: >"$T_TMP/out"
P1=$(send "$K" 1); send "$K" 2 >/dev/null
start_relay "$T_TMP/relay2" --mode ordered --sink exec --exec "$T_TMP/sink.sh" \
	--max-attempts 3 --in-flight 1 --poll-interval 100ms --poison halt
wait_until 20 "[ \"\$(q \"SELECT run_at = 'infinity' FROM pgoutbox.outbox WHERE id = $P1\")\" = t ]"
# Halted: another key of the same shard now waits; other shards flow.
send "$S" 2 >/dev/null; send "$O" 2 >/dev/null
wait_until 20 "grep -q '\"key\":\"$O\"' '$T_TMP/out'"
sleep 1
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "halt policy dead-lettered"
grep -q "\"key\":\"$S\"" "$T_TMP/out" && fail "key $S of the halted shard was delivered"
[ "$(pending)" = 3 ] || fail "pending $(pending), want 3 (the poison event and two waiting behind it)"
"$PGO_BIN" status >"$T_TMP/status"
grep -q 'HALTED by a poison event: boom' "$T_TMP/status" || fail "status does not show the halt: $(cat "$T_TMP/status")"
grep -q "shard .* halted: event $P1" "$T_TMP/relay2.log" || fail "no halt message in the log"
# The operator fixes the cause and releases the event.
touch "$T_TMP/fixed"
q "UPDATE pgoutbox.outbox SET run_at = now() WHERE id = $P1"
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
order=$(grep -o '"key":"[^"]*".*"n": [0-9]*' "$T_TMP/out" | sed 's/"key":"\([^"]*\)".*"n": \([0-9]*\)/\1:\2/' | tr '\n' ' ')
note "delivery order (halt policy): $order"
[ "$order" = "$O:2 $K:1 $K:2 $S:2 " ] || fail "order after the fix: $order"
