# Poison events of a queue captured through the WAL (docs/wal.md): they
# go to pgoutbox.dead_letters, as in table capture, and the queue moves
# on; `pgoutbox dead retry` sends them again with their ids.
#  1. A sink that rejects one event for good (dead) and keeps failing
#     another (retry, --max-attempts 3): both dead-lettered (attempts 1
#     and 3, the sink's reasons), every other event delivered in commit
#     order, past them; the queue's table stays empty.
#  2. The slot moved past them: a relay started again redelivers nothing.
#  3. `dead list` shows them; `dead retry --all` sends them again as
#     messages (no row), delivered with their ids, topic, key and payload.
. "$(dirname "$0")/../lib.sh"
unset PG_PORT PG_DIR PG_URL PG_OPTS
pg_start "$T_TMP/pgwal" wal_level=logical max_replication_slots=4 max_wal_senders=4 fsync=off ||
	fail "cannot start a cluster with wal_level=logical"
trap 'cleanup_pids; pg_stop' EXIT
t_db
"$PGO_BIN" queue create ev --capture wal >/dev/null || fail "queue create --capture wal"

# The sink: key "bad" is dead for good, key "slow" fails until fixed; the
# rest (and everything once fixed) is appended to out.
cat >"$T_TMP/sink.sh" <<SH
#!/bin/bash
while IFS= read -r line; do
	id=\${line#*\"id\":}; id=\${id%%,*}
	key=\${line#*\"key\":\"}; key=\${key%%\"*}
	if [ ! -f "$T_TMP/fixed" ] && [ "\$key" = bad ]; then
		echo "dead \$id refused for good"
	elif [ ! -f "$T_TMP/fixed" ] && [ "\$key" = slow ]; then
		echo "retry \$id not now"
	else
		echo "\$line" >> "$T_TMP/out"
	fi
done
SH
chmod +x "$T_TMP/sink.sh"
: >"$T_TMP/out"
send() { q "SELECT pgoutbox.send_to('ev', 't', '$1', 'x', '{\"n\": $2}')"; }
send a 1 >/dev/null
BAD=$(send bad 2)
send a 3 >/dev/null
SLOW=$(send slow 4)
send a 5 >/dev/null
export PGOUTBOX_RELAY_RETRY_BASE=50ms PGOUTBOX_RELAY_RETRY_MAX=200ms
RELAY=(--queue ev --sink exec --exec "$T_TMP/sink.sh" --max-attempts 3)
start_relay "$T_TMP/r1" "${RELAY[@]}"
wait_until 30 '[ "$(ids_of "$T_TMP/out" | wc -l)" -ge 3 ]'
wait_until 10 '[ "$(q "SELECT count(*) FROM pgoutbox.dead_letters")" = 2 ]'
stop_relay "$RELAY_PID"
n=$(grep -o '"n": [0-9]*' "$T_TMP/out" | cut -d' ' -f2 | tr '\n' ' ')
[ "$n" = "1 3 5 " ] || fail "delivered n: '$n', want '1 3 5 ' (past both poison events, in order)"
rows=$(q "SELECT id, queue, key, attempts, last_error FROM pgoutbox.dead_letters ORDER BY id" | tr '\n' ' ')
[ "$rows" = "$BAD|ev|bad|1|refused for good $SLOW|ev|slow|3|not now " ] ||
	fail "dead letters: '$rows'"
[ "$(q "SELECT payload->>'n', topic, type FROM pgoutbox.dead_letters WHERE id = $BAD")" = "2|t|x" ] ||
	fail "the dead letter's envelope: $(q "SELECT * FROM pgoutbox.dead_letters WHERE id = $BAD")"
grep -q "event $BAD to dead letters" "$T_TMP/r1.log" || fail "no log line for the dead letter: $(tail -3 "$T_TMP/r1.log")"

# 2. Confirmed past them: nothing comes again.
start_relay "$T_TMP/r2" "${RELAY[@]}"
wait_until 20 'grep -q "streaming slot" "$T_TMP/r2.log"'
send a 6 >/dev/null
wait_until 20 '[ "$(ids_of "$T_TMP/out" | wc -l)" -ge 4 ]'
stop_relay "$RELAY_PID"
n=$(grep -o '"n": [0-9]*' "$T_TMP/out" | cut -d' ' -f2 | tr '\n' ' ')
[ "$n" = "1 3 5 6 " ] || fail "after a restart, delivered n: '$n' (want '1 3 5 6 ': nothing again)"
[ "$(q "SELECT count(*) FROM pgoutbox.dead_letters")" = 2 ] || fail "dead letters changed on a restart"

# 3. dead list, dead retry: sent again as messages, with their ids.
list=$("$PGO_BIN" dead list --queue ev)
grep -q "$BAD" <<<"$list" && grep -q "$SLOW" <<<"$list" || fail "dead list: $list"
touch "$T_TMP/fixed"
"$PGO_BIN" dead retry --queue ev --all >/dev/null || fail "dead retry"
[ "$(q "SELECT count(*) FROM pgoutbox.dead_letters")" = 0 ] || fail "dead letters left after retry"
[ "$(q "SELECT count(*) FROM pgoutbox.ev")" = 0 ] || fail "dead retry put a row into a WAL queue's table"
start_relay "$T_TMP/r3" "${RELAY[@]}"
wait_until 20 '[ "$(ids_of "$T_TMP/out" | wc -l)" -ge 6 ]'
stop_relay "$RELAY_PID"
[ "$(ids_of "$T_TMP/out" | tail -2 | tr '\n' ' ')" = "$BAD $SLOW " ] ||
	fail "retried ids: $(ids_of "$T_TMP/out" | tail -2 | tr '\n' ' ') (want $BAD $SLOW)"
tail -2 "$T_TMP/out" | qgrep '"key":"bad".*"n": 2' || fail "the retried event's envelope: $(tail -2 "$T_TMP/out")"
note "dead-lettered $BAD (dead) and $SLOW (3 attempts), delivered past them; retried: $(ids_of "$T_TMP/out" | tail -2 | tr '\n' ' ')"
